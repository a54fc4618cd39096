import { randomUUID } from 'node:crypto';
import { TetherError } from '../../../core/errors.js';
import { BoundedMap } from '../../../core/util/bounded-map.js';

/**
 * Who each turn of the engine belongs to (issue 31). Every user message the gateway forwards
 * carries a `uuid` ({@link stampUserMessage}), and the engine reports each one it takes up as
 * `command_lifecycle` `started`, whether it opens a turn or is folded into the running one at a
 * tool round, and ends each turn with one `result` (docs/engine-protocol.md, section 3, seen
 * with the real CLI without `--replay-user-messages`). So the authors of the running turn are
 * the senders of the messages started since the last `result`.
 */

/** The author of a message the gateway did not forward, or forwarded before a restart: never the owner, so approval fails closed. */
export const UNKNOWN_AUTHOR = 'tether:unknown';

/** UUIDs remembered with their sender (a prompt queued behind many others still finds its author). */
export const MAX_REMEMBERED_UUIDS = 4096;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A user message as the gateway forwards it: its own `uuid` kept (it must be a UUID), else a
 * fresh one; `{kind: "human"}` as its origin when it names none (the engine treats a message
 * without an origin as unattributed). The one place a user message is stamped: prompts, queued
 * prompts and steers all pass here. Throws INVALID_ARGUMENT for a uuid that is not a UUID.
 */
export function stampUserMessage(line: Record<string, unknown>): Record<string, unknown> & { uuid: string } {
  if (line.uuid !== undefined && (typeof line.uuid !== 'string' || !UUID.test(line.uuid))) {
    throw new TetherError('INVALID_ARGUMENT', "a user message's uuid must be a UUID (or left out: the gateway stamps one)");
  }
  const uuid = (line.uuid as string | undefined) ?? randomUUID();
  const origin = line.origin === undefined ? { kind: 'human' } : undefined;
  // Assigning an own `__proto__` key would set the copy's prototype: such a line is spread.
  if (Object.hasOwn(line, '__proto__')) return { ...line, uuid, ...(origin ? { origin } : {}) };
  // Object.assign, then the new keys: the same object as `{ ...line, uuid }` (keys in the same
  // order), but V8 adds keys to a spread clone slowly (≈1.2 µs a prompt against ≈0.15).
  const out = Object.assign({}, line) as Record<string, unknown> & { uuid: string };
  out.uuid = uuid;
  if (origin) out.origin = origin;
  return out;
}

/** A change of the running turn's authors, as every member is told. */
export interface TurnChange {
  state: 'started' | 'joined';
  uuid: string;
  authors: string[];
}

/** The sender of each forwarded message by uuid, and the authors of the turn the engine is running. */
export class TurnAuthors {
  /** Sender by uuid, and whether the gateway made the uuid (the client sent none). */
  private readonly senders = new BoundedMap<string, { principal: string; stamped: boolean }>(MAX_REMEMBERED_UUIDS);
  private running: string[] | undefined;

  /**
   * A message of `principal` goes to the engine with `uuid` (`stamped`: made by the gateway).
   * Throws ALREADY_EXISTS when another principal's message used that uuid (it would take their
   * turn's authorship).
   */
  sent(uuid: string, principal: string, stamped: boolean): void {
    const earlier = this.senders.get(uuid)?.principal;
    if (earlier !== undefined && earlier !== principal)
      throw new TetherError(
        'ALREADY_EXISTS',
        `another member's message already used uuid ${uuid}; leave uuid out and the gateway stamps one`,
      );
    this.senders.set(uuid, { principal, stamped });
  }

  /** The authors of the running turn, in the order they joined; empty between turns. */
  get current(): readonly string[] {
    return this.running ?? [];
  }

  /**
   * One `command_lifecycle` line of the engine: `change` when a message started (a turn, or
   * joining the running one); `ours` when its uuid is one the gateway stamped, so the line is
   * the gateway's doing, not something the client asked for (members are told by the `turn`
   * event instead: a client such as the SDK drop-in sees the frames a local CLI would write).
   */
  lifecycle(line: Uint8Array): { change?: TurnChange; ours: boolean } {
    let v: { command_uuid?: unknown; state?: unknown };
    try {
      v = JSON.parse(Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('utf8'));
    } catch {
      return { ours: false };
    }
    if (typeof v.command_uuid !== 'string') return { ours: false };
    const sent = this.senders.get(v.command_uuid);
    const ours = sent?.stamped === true;
    if (v.state !== 'started') return { ours };
    const sender = sent?.principal ?? UNKNOWN_AUTHOR;
    const state = this.running === undefined ? 'started' : 'joined';
    const authors = this.running ?? [];
    if (!authors.includes(sender)) authors.push(sender);
    this.running = authors;
    return { change: { state, uuid: v.command_uuid, authors: [...authors] }, ours };
  }

  /** The engine's `result`: the turn is over. */
  ended(): void {
    this.running = undefined;
  }
}
