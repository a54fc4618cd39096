import { existsSync } from 'node:fs';
import { loadKeyFile, type TokenKey } from '../core/auth/keys.js';
import { resolveStateDir, stateKeyPath } from '../core/auth/state-dir.js';
import { TetherError } from '../core/errors.js';

/** --state-dir and --key: where a command that signs (token, login-link) finds the gateway's key. */
export const KEY_OPTIONS = { 'state-dir': { type: 'string' }, key: { type: 'string' } } as const;

/**
 * The key --key names, else the state folder's (--state-dir, TETHER_STATE_DIR, ~/.tether).
 * INVALID_ARGUMENT for both flags at once, and for a state folder without a key (`whenMissing`
 * says what to do about it).
 */
export function signingKeyFrom(v: Record<string, unknown>, whenMissing: string): TokenKey {
  if (v.key && v['state-dir']) throw new TetherError('INVALID_ARGUMENT', 'use --key or --state-dir, not both');
  let path = v.key as string | undefined;
  if (!path) {
    path = stateKeyPath(resolveStateDir(v['state-dir'] as string | undefined));
    if (!existsSync(path)) throw new TetherError('INVALID_ARGUMENT', `no key at ${path}: ${whenMissing}`);
  }
  return loadKeyFile(path);
}
