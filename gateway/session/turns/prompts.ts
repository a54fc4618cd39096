import { TetherError } from '../../../core/errors.js';
import type { PromptOutcome } from '../../metrics.js';
import type { PromptCall } from '../../policy/prompt-answers.js';
import { BoundedMap } from '../../../core/util/bounded-map.js';

export interface PendingPrompt {
  requestId: string;
  subtype: string;
  raisedAt: number;
  timer?: NodeJS.Timeout;
  /** For can_use_tool: the tool call asked about, for the audit record of its answer. */
  tool?: Record<string, unknown>;
  /** For can_use_tool: the call and the engine's proposed rules, to check answers against. */
  call?: PromptCall;
  /** For can_use_tool: the authors of the turn the call comes from, when it was raised. */
  turnAuthors?: readonly string[];
}

/** Told about every prompt raised and settled, with how long it waited (the gateway's metrics). */
export interface PromptObserver {
  promptRaised(): void;
  promptSettled(outcome: PromptOutcome, waitedMs: number): void;
}

/**
 * Requests the engine made to the host (can_use_tool, hook_callback, elicitation, …) that
 * are waiting for a client. The first valid answer wins; later ones get a typed "already
 * decided" error. Bounded: past `maxPending` the caller must deny new prompts itself.
 */
export class PromptBook {
  private readonly pending = new Map<string, PendingPrompt>();
  /** Recently decided ids (bounded), so a late answer is told "already decided", not "unknown". */
  private readonly decided: BoundedMap<string, string>;

  /** Set once the book holds its restored prompts, so only this process's prompts are raised to it. */
  observer: PromptObserver | undefined;

  constructor(
    private readonly maxPending = 32,
    maxRemembered = 1024,
  ) {
    this.decided = new BoundedMap(maxRemembered);
  }

  get size(): number {
    return this.pending.size;
  }

  get full(): boolean {
    return this.pending.size >= this.maxPending;
  }

  ids(): string[] {
    return [...this.pending.keys()];
  }

  has(requestId: string): boolean {
    return this.pending.has(requestId);
  }

  get(requestId: string): PendingPrompt | undefined {
    return this.pending.get(requestId);
  }

  raise(prompt: PendingPrompt): void {
    this.pending.set(prompt.requestId, prompt);
    this.observer?.promptRaised();
  }

  /**
   * Claims the prompt for one answer. Throws FAILED_PRECONDITION when it was already decided
   * or withdrawn, NOT_FOUND when the id was never raised here.
   */
  claim(requestId: string, by: string, outcome: PromptOutcome = 'answered'): PendingPrompt {
    const p = this.pending.get(requestId);
    if (!p) {
      const how = this.decided.get(requestId);
      if (how)
        throw new TetherError('FAILED_PRECONDITION', `permission request ${requestId} was already decided (${how})`, {
          already_decided: true,
        });
      throw new TetherError('NOT_FOUND', `no pending request ${requestId} in this session`);
    }
    this.settle(requestId, `answered by ${by}`, outcome);
    return p;
  }

  /** Removes a prompt without an answer (engine cancelled it, expiry, engine gone). */
  withdraw(requestId: string, why: string, outcome: PromptOutcome = 'cancelled'): PendingPrompt | undefined {
    const p = this.pending.get(requestId);
    if (p) this.settle(requestId, why, outcome);
    return p;
  }

  /** Withdraws every pending prompt; returns them. */
  clear(why: string, outcome: PromptOutcome = 'engine_gone'): PendingPrompt[] {
    const all = [...this.pending.values()];
    for (const p of all) this.settle(p.requestId, why, outcome);
    return all;
  }

  private settle(requestId: string, how: string, outcome: PromptOutcome): void {
    const p = this.pending.get(requestId);
    if (p?.timer) clearTimeout(p.timer);
    if (p) this.observer?.promptSettled(outcome, Date.now() - p.raisedAt);
    this.pending.delete(requestId);
    this.decided.set(requestId, how);
  }
}
