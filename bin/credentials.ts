/**
 * The terminal's stored sign-ins (`tether login`): ~/.tether/credentials.json, mode 0600 in a
 * 0700 folder, one client token per gateway, keyed by the gateway's web origin (ws://H:P and
 * http://H:P are one gateway). `--token` and TETHER_TOKEN always win over it.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { TetherError } from '../core/errors.js';
import { ensurePrivateDir, PRIVATE_FILE_MODE } from '../core/util/private-files.js';

/** The file, in the user's ~/.tether (whatever the gateway's state folder). */
export function credentialsPath(): string {
  return join(homedir(), '.tether', 'credentials.json');
}

const Entry = z.object({ token: z.string().min(1), principal: z.string(), expires_at: z.string() });
const CredentialsFile = z.object({ gateways: z.record(z.string(), Entry) });
type Credentials = z.infer<typeof CredentialsFile>;

/**
 * The web origin of a gateway URL: ws→http, wss→https, path dropped. INVALID_ARGUMENT for a
 * URL that has none (grpc:// has no web page to sign in on).
 */
export function gatewayOrigin(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TetherError('INVALID_ARGUMENT', `not a gateway URL: ${JSON.stringify(url.slice(0, 200))}`);
  }
  const scheme = { 'ws:': 'http:', 'http:': 'http:', 'wss:': 'https:', 'https:': 'https:' }[u.protocol];
  if (!scheme)
    throw new TetherError(
      'INVALID_ARGUMENT',
      `tether login needs the gateway's WebSocket or web address (ws://, wss://, http://, https://), got ${u.protocol}//`,
    );
  return `${scheme}//${u.host}`;
}

function read(): Credentials {
  let text: string;
  try {
    text = readFileSync(credentialsPath(), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { gateways: {} };
    throw new TetherError('FAILED_PRECONDITION', `cannot read ${credentialsPath()}: ${(err as Error).message}`);
  }
  try {
    const parsed = CredentialsFile.safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data;
  } catch {
    // falls through
  }
  throw new TetherError('FAILED_PRECONDITION', `${credentialsPath()} is damaged: delete it and run tether login again`);
}

function write(c: Credentials): void {
  const path = credentialsPath();
  ensurePrivateDir(join(homedir(), '.tether'));
  writeFileSync(`${path}.tmp`, JSON.stringify(c, null, 1) + '\n', { mode: PRIVATE_FILE_MODE });
  renameSync(`${path}.tmp`, path);
}

/** Keeps a client token for a gateway (replacing the one before). */
export function storeToken(gateway: string, entry: z.infer<typeof Entry>): void {
  const c = read();
  c.gateways[gatewayOrigin(gateway)] = entry;
  write(c);
}

/** Forgets a gateway's token; false when none was kept. */
export function forgetToken(gateway: string): boolean {
  const c = read();
  const key = gatewayOrigin(gateway);
  if (!(key in c.gateways)) return false;
  delete c.gateways[key];
  write(c);
  return true;
}

/** The kept, unexpired token of the first of `gateways` that has one (undefined: none, or no file). */
export function storedTokenFor(gateways: string[]): string | undefined {
  const c = read();
  for (const g of gateways) {
    let key: string;
    try {
      key = gatewayOrigin(g);
    } catch {
      continue; // a grpc:// gateway has no stored sign-in
    }
    const e = c.gateways[key];
    if (e && Date.parse(e.expires_at) > Date.now()) return e.token;
  }
  return undefined;
}
