import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { generateTokenKey, writeKeyFile } from './keygen.js';
import { loadKeyFile, type TokenKey } from './keys.js';
import { ensurePrivateDir } from '../util/private-files.js';

/** The gateway's key inside its state folder. */
export const STATE_KEY_FILE = 'gateway-key.json';

/** The state folder when none is configured. */
export const DEFAULT_STATE_DIR = join(homedir(), '.tether');

/** The state folder: the flag, else TETHER_STATE_DIR, else {@link DEFAULT_STATE_DIR}. */
export function resolveStateDir(flag?: string): string {
  const dir = flag || process.env.TETHER_STATE_DIR || DEFAULT_STATE_DIR;
  return resolve(dir);
}

/** Path of the gateway key in a state folder. */
export function stateKeyPath(stateDir: string): string {
  return join(stateDir, STATE_KEY_FILE);
}

/**
 * Loads the state folder's key, generating an HS256 key (file mode 0600, folder 0700) the
 * first time. `created` tells whether it was made now. The folder is made private first: an
 * existing one readable by others is tightened to 0700; one owned by another user, or that
 * cannot be tightened, is refused (FAILED_PRECONDITION).
 */
export function ensureStateKey(stateDir: string): { key: TokenKey; path: string; created: boolean } {
  ensurePrivateDir(stateDir);
  const path = stateKeyPath(stateDir);
  if (existsSync(path)) return { key: loadKeyFile(path), path, created: false };
  const generated = generateTokenKey('HS256');
  try {
    writeKeyFile(path, generated.privateJwk);
  } catch (err) {
    // Another process created it first: use theirs.
    if (existsSync(path)) return { key: loadKeyFile(path), path, created: false };
    throw err;
  }
  return { key: generated.key, path, created: true };
}
