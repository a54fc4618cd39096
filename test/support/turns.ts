import type { RemoteSession, SessionItem } from '../../client/remote-session.js';
import { asPermissionRequest, type PermissionAnswer, type PermissionRequest } from '../../client/permission-policy.js';
import { withTimeout } from './stack.js';

export interface TurnLog {
  items: SessionItem[];
  /** Engine messages only (origin engine), in order. */
  messages: Record<string, unknown>[];
  prompts: PermissionRequest[];
  result: Record<string, unknown>;
}

/**
 * Reads a session until the next `result`, answering each permission prompt with `decide`
 * (or leaving it unanswered when decide returns undefined). Bounded by `timeoutMs`.
 */
export async function readTurn(
  session: RemoteSession,
  decide: (p: PermissionRequest) => PermissionAnswer | undefined,
  iterator: AsyncIterator<SessionItem> = session[Symbol.asyncIterator](),
  timeoutMs = 30_000,
): Promise<TurnLog> {
  const log: Omit<TurnLog, 'result'> = { items: [], messages: [], prompts: [] };
  const run = async (): Promise<TurnLog> => {
    for (;;) {
      const next = await iterator.next();
      if (next.done) throw new Error(`session ended before a result; saw ${log.messages.map((m) => m.type).join(',')}`);
      const item = next.value;
      log.items.push(item);
      if (item.kind !== 'engine' || item.origin !== 'engine') continue;
      log.messages.push(item.message);
      const ask = asPermissionRequest(item.message);
      if (ask) {
        log.prompts.push(ask);
        const answer = decide(ask);
        if (answer) await session.answer(ask.requestId, answer);
      }
      if (item.message.type === 'result') return { ...log, result: item.message };
    }
  };
  return withTimeout(run(), timeoutMs, 'the turn to finish');
}

/** Text of every tool_result block the engine reported, in order. */
export function toolResults(messages: Record<string, unknown>[]): { content: string; is_error: boolean }[] {
  const out: { content: string; is_error: boolean }[] = [];
  for (const m of messages) {
    if (m.type !== 'user') continue;
    const content = (m.message as { content?: unknown }).content;
    if (!Array.isArray(content)) continue;
    for (const b of content as Record<string, unknown>[]) {
      if (b.type === 'tool_result')
        out.push({ content: typeof b.content === 'string' ? b.content : JSON.stringify(b.content), is_error: b.is_error === true });
    }
  }
  return out;
}
