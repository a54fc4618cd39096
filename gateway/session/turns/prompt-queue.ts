import { TetherError } from '../../../core/errors.js';
import { tetherEvent, type PromptPriority, type QueueChange, type QueuedPrompt } from '../../../core/protocol/events.js';
import type { LineMeta } from '../../../core/protocol/methods.js';
import type { SessionHistory } from '../history/session-history.js';

/** Most prompts one session holds queued; more are refused until some start or are withdrawn. */
export const MAX_QUEUED_PROMPTS = 64;

/**
 * How much of a queued prompt's text each `queued` event repeats. Every change re-sends the
 * whole queue, so full prompts would cost O(n²) bytes (32 prompts of 512 KiB sent mid-turn made
 * 260 MiB of events); the full prompt is in its own `prompt` event already.
 */
export const QUEUED_PREVIEW_CHARS = 1_000;

/** A prompt's message as the queue shows it: text cut at QUEUED_PREVIEW_CHARS, images without their data. */
export function queuedPreview(message: unknown): unknown {
  const cut = (t: string) => (t.length > QUEUED_PREVIEW_CHARS ? `${t.slice(0, QUEUED_PREVIEW_CHARS)}…` : t);
  const m = message as { role?: unknown; content?: unknown } | undefined;
  if (typeof m?.content === 'string') return { ...m, content: cut(m.content) };
  if (!Array.isArray(m?.content)) return message;
  let left = QUEUED_PREVIEW_CHARS;
  const content = m.content.map((b: unknown) => {
    const block = b as { type?: unknown; text?: unknown };
    if (block?.type === 'text' && typeof block.text === 'string') {
      const text = block.text.length > left ? `${block.text.slice(0, Math.max(left, 0))}…` : block.text;
      left -= block.text.length;
      return { type: 'text', text };
    }
    return { type: typeof block?.type === 'string' ? block.type : 'unknown' };
  });
  return { ...m, content };
}

/** The engine takes `now` first, then `next`, then `later`, each in arrival order (docs/engine-protocol.md 3.2). */
const RANK: Record<PromptPriority, number> = { now: 0, next: 1, later: 2 };

/**
 * One session's prompts that wait for their turn, as the engine holds them: in the order they
 * will run, each with its author. The gateway adds a prompt when it forwards one while a turn
 * runs; the engine's `command_lifecycle` frames say when one starts or is cancelled. Every
 * change is announced to every member as the whole queue (a `queued` event), so a member who
 * attaches later reads the current queue from the last one.
 */
export class PromptQueue {
  private readonly prompts: QueuedPrompt[] = [];
  /**
   * The engine speaks the CLI's turns (it wrote a turn's `system/init`, or a `command_lifecycle`
   * frame), so it tells when a uuid-stamped prompt starts: only then are prompts queued here,
   * and an engine that never does (a stand-in) leaves no prompt stuck.
   */
  private engineTracks = false;

  constructor(private readonly history: SessionHistory) {}

  /** Whether a prompt sent while a turn runs is shown queued: the engine reports when prompts start. */
  get tracking(): boolean {
    return this.engineTracks;
  }

  get size(): number {
    return this.prompts.length;
  }

  /** Refuses a prompt that cannot be queued (full, or its uuid taken); changes nothing. */
  assertRoom(uuid: string): void {
    if (this.prompts.some((p) => p.uuid === uuid))
      throw new TetherError('INVALID_ARGUMENT', `a queued prompt already has uuid ${uuid}; send a fresh uuid (or none)`);
    if (this.prompts.length >= MAX_QUEUED_PROMPTS)
      throw new TetherError(
        'RESOURCE_EXHAUSTED',
        `${MAX_QUEUED_PROMPTS} prompts are already queued; wait for some to run or withdraw some`,
      );
  }

  /** A prompt the engine took while a turn runs: queued in the engine's order and announced. */
  add(prompt: QueuedPrompt): void {
    this.assertRoom(prompt.uuid);
    const at = this.prompts.findIndex((p) => RANK[p.priority] > RANK[prompt.priority]);
    this.prompts.splice(at < 0 ? this.prompts.length : at, 0, { ...prompt, message: queuedPreview(prompt.message) });
    this.announce({ action: 'queued', uuids: [prompt.uuid], by: prompt.principal });
  }

  /**
   * Checks that `principal` may withdraw `uuid` now and marks it withdrawing: the author or the
   * session's owner, while it is queued. Throws NOT_FOUND / FAILED_PRECONDITION / PERMISSION_DENIED.
   */
  beginWithdraw(uuid: string, principal: string, isOwner: boolean): QueuedPrompt {
    const prompt = this.prompts.find((p) => p.uuid === uuid);
    if (!prompt)
      throw new TetherError(
        'FAILED_PRECONDITION',
        `prompt ${uuid} is not queued (it has started, was withdrawn, or was never queued): only a queued prompt can be withdrawn`,
      );
    if (prompt.principal !== principal && !isOwner)
      throw new TetherError(
        'PERMISSION_DENIED',
        `only its author (${prompt.principal}) or the session's owner may withdraw this queued prompt`,
      );
    if (prompt.withdrawing)
      throw new TetherError('FAILED_PRECONDITION', `prompt ${uuid} is already being withdrawn by ${prompt.withdrawing}`);
    prompt.withdrawing = principal;
    this.announce({ action: 'withdrawing', uuids: [uuid], by: principal });
    return prompt;
  }

  /** The withdrawal could not be sent: the prompt stays queued as it was. */
  abortWithdraw(uuid: string): void {
    const prompt = this.prompts.find((p) => p.uuid === uuid);
    if (prompt) delete prompt.withdrawing;
  }

  /** A stop that cancels the queue: every queued prompt leaves it, announced once. Returns how many. */
  clear(by: string): number {
    const uuids = this.prompts.splice(0).map((p) => p.uuid);
    if (uuids.length > 0) this.announce({ action: 'cleared', uuids, by });
    return uuids.length;
  }

  /**
   * Follows one engine line: a queued prompt's `command_lifecycle` `started` moves it into the
   * transcript (`turnRunning`: it joins the running turn), `cancelled` withdraws it.
   */
  follow(meta: LineMeta, turnRunning: boolean): void {
    if (meta.type === 'system' && meta.subtype === 'init') this.engineTracks = true;
    if (meta.type !== 'command_lifecycle' || meta.command_uuid === undefined) return;
    this.engineTracks = true;
    const at = this.prompts.findIndex((p) => p.uuid === meta.command_uuid);
    if (at < 0) return;
    const [prompt] = this.prompts.splice(at, 1);
    if (meta.state === 'started') {
      const steer = prompt.priority === 'now';
      this.announce({ action: 'started', uuids: [prompt.uuid], by: prompt.principal, ...(steer ? { steer } : { folded: turnRunning }) });
    } else if (meta.state === 'cancelled' || meta.state === 'completed') {
      this.announce({ action: 'withdrawn', uuids: [prompt.uuid], by: prompt.withdrawing ?? 'the engine' });
    } else {
      this.prompts.splice(at, 0, prompt); // `queued` again: nothing changed
    }
  }

  private announce(change: QueueChange): void {
    this.history.append({ event: tetherEvent({ subtype: 'queued', prompts: this.prompts.map((p) => ({ ...p })), change }) });
  }
}
