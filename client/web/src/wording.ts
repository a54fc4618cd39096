/**
 * How the stream's endings read to a person: a turn's error result, an interrupt, the engine
 * exiting. Plain sentences naming who did what; the engine's internal tags stay out.
 */
import type { EngineMessage } from './frames.js';

/** `[ede_diagnostic] …`-style tags and `<tool_use_error>` wrappers the engine puts in its own texts. */
export function plainEngineText(text: string): string {
  return text
    .replace(/^\s*\[[a-z_]+\]\s*/i, '')
    .replace(/<\/?[a-z_]+>/gi, '')
    .trim();
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
  return {
    text: `The engine stopped unexpectedly (${code === null ? `signal ${signal ?? 'unknown'}` : `exit code ${code}`}); the session has ended.`,
    tone: 'error',
  };
}

/** A session's state as a person reads it (the wire's `requires_action` and friends stay on the wire). */
export function stateLabel(state: string): string {
  const words: Record<string, string> = {
    starting: 'starting',
    idle: 'idle',
    running: 'working',
    requires_action: 'waiting for an answer',
    'agent-lost': 'build machine out of reach',
    unresponsive: 'engine not answering',
    ended: 'ended',
  };
  return words[state] ?? state.replace(/[_-]/g, ' ');
}

/** A tool result's text without the engine's markup: `<tool_use_error>` tags, `AbortError:` prefixes. */
export function plainToolResult(text: string): string {
  if (/AbortError: Tool permission stream closed/.test(text))
    return 'Nobody answered the permission request before the engine stopped waiting; the tool did not run.';
  const wrapped = /^\s*<tool_use_error>([\s\S]*)<\/tool_use_error>\s*$/.exec(text);
  // Only the engine's own wrapper and its error class name go; a tool's output (a traceback) stays as it was.
  return wrapped ? wrapped[1].replace(/^[A-Z][a-zA-Z]*Error: /, '').trim() : text;
}

/** Why the link is down, as a person reads it: network failures say so, not "Failed to fetch". */
export function linkTrouble(err: unknown): string {
  if (err instanceof TypeError) return 'the network is unreachable';
  if (err instanceof DOMException && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'the gateway did not answer';
  const m = err instanceof Error ? err.message : String(err);
  return /^closed \(\d+\)$/.test(m) || m === '' ? 'the connection closed' : m;
}

/** The gateway's note that early frames are gone, said plainly. */
export function gapNote(fromSeq: number, toSeq: number): string {
  return fromSeq <= 1
    ? 'The start of this session is no longer kept on the gateway; the transcript begins later.'
    : `Part of this session (${toSeq - fromSeq + 1} messages) is no longer kept on the gateway and is missing here.`;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const tokens = (n: number) => (n >= 10_000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));

/** One line under a finished turn: how long, how many tokens (the context it read, what it wrote), what it cost. */
export function turnSummary(m: EngineMessage, costUsd: number | undefined): string {
  const u = (typeof m.usage === 'object' && m.usage !== null ? m.usage : {}) as Record<string, unknown>;
  const read = num(u.input_tokens) + num(u.cache_read_input_tokens) + num(u.cache_creation_input_tokens);
  const parts = [`${(num(m.duration_ms) / 1000).toFixed(1)} s`, `${tokens(read)} tokens read, ${tokens(num(u.output_tokens))} written`];
  if (costUsd !== undefined && costUsd > 0) parts.push(`$${costUsd.toFixed(4)}`);
  return parts.join(' · ');
}

/** system/api_retry: the model's API failed and the engine tries again. */
export function apiRetryNote(m: EngineMessage): string {
  const status = typeof m.error_status === 'number' ? ` (HTTP ${m.error_status})` : '';
  const wait = typeof m.retry_delay_ms === 'number' ? ` in ${Math.max(1, Math.round(m.retry_delay_ms / 1000))} s` : '';
  const of = typeof m.max_retries === 'number' ? ` of ${m.max_retries}` : '';
  return `The model's API failed${status}; the engine tries again${wait} (attempt ${num(m.attempt)}${of}).`;
}

/** system/compact_boundary: the engine summarised the conversation to fit the model's context. */
export function compactNote(m: EngineMessage): string {
  const meta = (typeof m.compact_metadata === 'object' && m.compact_metadata !== null ? m.compact_metadata : {}) as Record<string, unknown>;
  const before = num(meta.pre_tokens);
  return `The conversation was compacted to fit the model's context${before ? ` (it was ${tokens(before)} tokens)` : ''}; earlier details are summarised.`;
}
