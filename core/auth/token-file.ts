import { readFileSync } from 'node:fs';
import { TetherError } from '../errors.js';

/** Largest token file read (a token is at most 8 KiB). */
export const MAX_TOKEN_FILE_BYTES = 64 * 1024;

/**
 * Reads a token from a file (`tether token --out` writes one), trimmed. Called again on every
 * (re)connect and renewal, so replacing the file is how a long-running agent or client gets a
 * fresh token. Throws INVALID_ARGUMENT when the file is missing, empty or too large.
 */
export function readTokenFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (text.length > MAX_TOKEN_FILE_BYTES)
    throw new TetherError('INVALID_ARGUMENT', `cannot read ${path}: larger than ${MAX_TOKEN_FILE_BYTES} bytes`);
  const token = text.trim();
  if (!token) throw new TetherError('INVALID_ARGUMENT', `${path} is empty`);
  return token;
}
