/**
 * The one place the page reads a `session.frame` (and `session.reply`) notification. An
 * engine frame carries the engine's line as a raw JSON value (`message`, protocol 2.0; see
 * core/wire/session-frame.ts), which the socket's one JSON.parse already turned into an
 * object; an escaped string (`line`, as session.reply still carries) is parsed here.
 */
import type { TetherEvent } from '../../../core/protocol/events.js';

/** An engine message: one of the engine's stream-json objects, untouched. */
export type EngineMessage = Record<string, unknown>;

/** One item of a session's stream, as the page uses it. */
export type StreamItem =
  | { kind: 'engine'; seq: number; origin: 'engine' | 'gateway'; message: EngineMessage }
  | { kind: 'event'; seq: number; event: TetherEvent };

/** The params of a session.frame notification, as far as the page reads them. */
export interface FrameParams {
  session_id: string;
  seq: number;
  origin: 'engine' | 'gateway';
  line?: string;
  message?: unknown;
  event?: TetherEvent;
}

/** Parses a line into an object; anything that is not a JSON object reads as undefined. */
function objectOf(value: unknown): EngineMessage | undefined {
  let v = value;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      return undefined;
    }
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as EngineMessage) : undefined;
}

/** Turns a session.frame notification into a stream item (undefined: nothing readable). */
export function readFrame(p: FrameParams): StreamItem | undefined {
  if (p.event) return { kind: 'event', seq: p.seq, event: p.event };
  const message = objectOf(p.message ?? p.line);
  return message ? { kind: 'engine', seq: p.seq, origin: p.origin, message } : undefined;
}

/** Turns a session.reply notification (this page's own control_response) into the engine's message. */
export function readReply(p: { line?: string; message?: unknown }): EngineMessage | undefined {
  return objectOf(p.message ?? p.line);
}
