import { mkdirSync, readdirSync, statSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TetherError } from '../core/errors.js';

/** Most a transcript handed between agents may weigh (it travels in one message through the gateway). */
export const MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024;

/** An engine session id as the CLI writes it (a UUID): never a path. */
const ENGINE_SESSION_ID = /^[0-9a-fA-F-]{8,64}$/;

/** The folder under `$HOME/.claude/projects` where the CLI keeps a folder's transcripts: every character but letters and digits becomes `-`. */
export function projectFolder(home: string, cwd: string): string {
  return join(home, '.claude', 'projects', cwd.replace(/[^a-zA-Z0-9]/g, '-'));
}

function checkId(id: string): void {
  if (!ENGINE_SESSION_ID.test(id))
    throw new TetherError('INVALID_ARGUMENT', `engine session id ${JSON.stringify(id.slice(0, 80))} is not one the engine writes`);
}

/**
 * Reads the engine's transcript of session `id` (`$HOME/.claude/projects/<folder>/<id>.jsonl`;
 * the folder is searched, so a session moved within the machine is found too). Throws
 * NOT_FOUND when there is none, RESOURCE_EXHAUSTED past {@link MAX_TRANSCRIPT_BYTES}.
 */
export function readTranscript(home: string, cwd: string, id: string): string {
  checkId(id);
  const first = join(projectFolder(home, cwd), `${id}.jsonl`);
  const root = join(home, '.claude', 'projects');
  let file: string | undefined;
  try {
    if (statSync(first).isFile()) file = first;
  } catch {
    file = readdirSafe(root)
      .map((d) => join(root, d, `${id}.jsonl`))
      .find((f) => isFile(f));
  }
  if (!file) throw new TetherError('NOT_FOUND', `no transcript of engine session ${id} under ${root}`);
  const bytes = statSync(file).size;
  if (bytes > MAX_TRANSCRIPT_BYTES)
    throw new TetherError('RESOURCE_EXHAUSTED', `the transcript is ${bytes} bytes, over the ${MAX_TRANSCRIPT_BYTES} a move carries`);
  return readFileSync(file, 'utf8');
}

/** Writes a transcript where the engine started in `cwd` with this HOME looks for it (mode 0600). */
export function writeTranscript(home: string, cwd: string, id: string, jsonl: string): string {
  checkId(id);
  if (Buffer.byteLength(jsonl) > MAX_TRANSCRIPT_BYTES)
    throw new TetherError('RESOURCE_EXHAUSTED', `the transcript is over the ${MAX_TRANSCRIPT_BYTES} bytes a move carries`);
  const folder = projectFolder(home, cwd);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const file = join(folder, `${id}.jsonl`);
  writeFileSync(file, jsonl, { mode: 0o600 });
  return file;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
