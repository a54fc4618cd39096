/**
 * How the stream's endings read to a person: a turn's error result, an interrupt, the engine
 * exiting. Plain sentences naming who did what; the engine's internal tags stay out.
 */
import type { EngineMessage } from './frames.js';

/** `[ede_diagnostic] …`-style tags and `<tool_use_error>` wrappers the engine puts in its own texts. */
export function plainEngineText(text: string): string {
  return text.replace(/^\s*\[[a-z_]+\]\s*/i, '').replace(/<\/?[a-z_]+>/gi, '').trim();
}

/** The note for a turn that ended with `is_error` (undefined: say nothing), given who interrupted it, if anyone did. */
export function turnEndNote(m: EngineMessage, interruptedBy: string | undefined): { text: string; tone: 'info' | 'error' } | undefined {
  const reason = String(m.terminal_reason ?? '');
  if (interruptedBy !== undefined || reason.startsWith('aborted')) {
    return { text: interruptedBy ? `${interruptedBy} interrupted the turn.` : 'The turn was interrupted.', tone: 'info' };
  }
  if (reason === 'api_error') {
    const status = typeof m.api_error_status === 'number' ? ` (HTTP ${m.api_error_status})` : '';
    return { text: `The model could not be reached${status}; the turn ended. Send the prompt again to retry.`, tone: 'error' };
  }
  const said = typeof m.result === 'string' && m.result ? m.result : Array.isArray(m.errors) ? m.errors.map(String).join('; ') : '';
  const plain = plainEngineText(said);
  return { text: plain ? `The turn ended with an error: ${plain}` : 'The turn ended with an error.', tone: 'error' };
}

/** The note for the engine's exit; `reason` is the gateway's (e.g. `stopped by alice`). */
export function exitNote(code: number | null, signal: string | null, reason: string | undefined): { text: string; tone: 'info' | 'error' } {
  const by = reason && /^stopped by (.+)$/.exec(reason)?.[1];
  if (by) return { text: `${by} stopped the session.`, tone: 'info' };
  if (reason) return { text: `The session ended: ${reason}.`, tone: code === 0 ? 'info' : 'error' };
  if (code === 0) return { text: 'The engine finished; the session has ended.', tone: 'info' };
  return { text: `The engine stopped unexpectedly (${code === null ? `signal ${signal ?? 'unknown'}` : `exit code ${code}`}); the session has ended.`, tone: 'error' };
}
