import type { CreateProgress } from '../core/protocol/methods.js';

/** Tells the person at the terminal (stderr) that a create waits, e.g. for its agent to come back. */
export function printCreateProgress(p: CreateProgress): void {
  process.stderr.write(`* ${p.message}\n`);
}
