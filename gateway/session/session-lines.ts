import { TetherError } from '../../core/errors.js';

/** Small pure helpers for the lines a session sends and checks. */

/** Size of a prompt for the audit trail (never its text). */
export function promptChars(line: Record<string, unknown>): number {
  const content = (line.message as { content?: unknown }).content;
  return typeof content === 'string' ? content.length : JSON.stringify(content).length;
}

/** The engine starts a turn even for a user frame without content: reject it here. */
export function checkUserMessage(line: Record<string, unknown>): void {
  const m = line.message as { role?: unknown; content?: unknown } | undefined;
  if (typeof m !== 'object' || m === null || m.role !== 'user' || !(typeof m.content === 'string' || Array.isArray(m.content))) {
    throw new TetherError('INVALID_ARGUMENT', 'a user frame needs message: {role: "user", content: string | content blocks}');
  }
}
