import type { SessionItem } from '../../client/remote-session.js';
import { expect } from 'vitest';
import { TetherError } from '../../core/errors.js';
import { withTimeout } from './wait.js';

/** An engine line as the library hands it out. */
export type EngineItem = Extract<SessionItem, { kind: 'engine' }>;
/** The engine's answer to this client's own control request. */
export type ReplyItem = Extract<SessionItem, { kind: 'reply' }>;

export const isEngineItem = (i: SessionItem): i is EngineItem => i.kind === 'engine';
export const isReply = (i: SessionItem): i is ReplyItem => i.kind === 'reply';

/**
 * Pulls items from a session iterator into `into` until `done(item)` is true; returns that
 * item (typed by `done` when it is a type guard). Bounded by `timeoutMs`.
 */
export async function until<T extends SessionItem>(
  it: AsyncIterator<SessionItem>,
  done: (item: SessionItem) => item is T,
  into?: SessionItem[],
  timeoutMs?: number,
  what?: string,
): Promise<T>;
export async function until(
  it: AsyncIterator<SessionItem>,
  done: (item: SessionItem) => boolean,
  into?: SessionItem[],
  timeoutMs?: number,
  what?: string,
): Promise<SessionItem>;
export async function until(
  it: AsyncIterator<SessionItem>,
  done: (item: SessionItem) => boolean,
  into: SessionItem[] = [],
  timeoutMs = 20_000,
  what = 'the expected item',
): Promise<SessionItem> {
  const run = async () => {
    for (;;) {
      const r = await it.next();
      if (r.done) throw new Error(`stream ended before ${what}; saw ${into.map(describe).join(', ')}`);
      into.push(r.value);
      if (done(r.value)) return r.value;
    }
  };
  // A wait that runs out says what it did see (the last 20 items), as one that saw the stream end does.
  return withTimeout(run(), timeoutMs, () => `${what}; saw ${into.length} item(s), the last: ${into.slice(-20).map(describe).join(', ')}`);
}

export function describe(i: SessionItem): string {
  if (i.kind === 'event') return `event:${i.event.subtype}`;
  const m = i.message;
  const sub = (m.subtype ?? (m.request as { subtype?: string } | undefined)?.subtype) as string | undefined;
  return `${i.kind}:${String(m.type)}${sub ? '/' + sub : ''}`;
}

type JsonPath = readonly (string | number)[];

/** The value at `path` in parsed JSON (objects by key, arrays by index); undefined where the path leaves it. */
export function jsonAt(value: unknown, ...path: JsonPath): unknown {
  let at = value;
  for (const key of path) {
    if (at === null || typeof at !== 'object') return undefined;
    at = (at as Record<string | number, unknown>)[key];
  }
  return at;
}

/** The string at `path` in parsed JSON; throws, naming the path, when it is anything else. */
export function stringAt(value: unknown, ...path: JsonPath): string {
  const at = jsonAt(value, ...path);
  if (typeof at !== 'string') throw new Error(`expected a string at ${path.join('.')}, got ${typeof at}`);
  return at;
}

/** The number at `path` in parsed JSON; throws, naming the path, when it is anything else. */
export function numberAt(value: unknown, ...path: JsonPath): number {
  const at = jsonAt(value, ...path);
  if (typeof at !== 'number') throw new Error(`expected a number at ${path.join('.')}, got ${typeof at}`);
  return at;
}

export const isEngine = (type: string, subtype?: string) => (i: SessionItem) =>
  i.kind === 'engine' &&
  i.origin === 'engine' &&
  i.message.type === type &&
  (subtype === undefined || (i.message.request as { subtype?: string } | undefined)?.subtype === subtype || i.message.subtype === subtype);

export const isCanUseTool = isEngine('control_request', 'can_use_tool');
export const isResult = isEngine('result');
export const isWithdrawal = (requestId: string) => (i: SessionItem) =>
  i.kind === 'engine' && i.origin === 'gateway' && i.message.type === 'control_cancel_request' && i.message.request_id === requestId;

/** The typed error code a promise rejects with, 'none' when it resolves, `untyped: …` for anything but a TetherError. */
export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'none';
  } catch (err) {
    return err instanceof TetherError ? err.code : `untyped: ${String(err)}`;
  }
}

/** The TetherError a promise rejects with; fails the test when it resolves or rejects with anything else. */
export async function rejectionOf(p: Promise<unknown>): Promise<TetherError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(TetherError);
    return err as TetherError;
  }
  throw new Error('expected a rejection with a TetherError, but the call succeeded');
}
