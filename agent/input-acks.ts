/** How long an input ack may wait for output to ride on before it goes alone. */
export const INPUT_ACK_DEFER_MS = 100;

/**
 * The agent's input acks toward one gateway that folds them (capability
 * `acks.folded.v1`). An ack waits, per session, for the next output of that session
 * and rides on it (`input_ack` in its header): an engine answers a prompt with output
 * anyway. One the engine leaves without output goes alone after {@link INPUT_ACK_DEFER_MS}.
 * Acks are cumulative, so only the highest seq per session is kept. A deferred ack costs
 * nothing in safety: the gateway keeps an unacked input and re-sends it after a reconnect,
 * and the agent writes each input seq at most once (its hello says which it wrote).
 */
export class DeferredInputAcks {
  private readonly waiting = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  /** `sendAlone` sends one ack by itself (the session.input_ack notification). */
  constructor(private readonly sendAlone: (sessionId: string, seq: number) => void) {}

  /** Every input of the session up to `seq` was written to the engine. */
  note(sessionId: string, seq: number): void {
    this.waiting.set(sessionId, Math.max(seq, this.waiting.get(sessionId) ?? 0));
    this.timer ??= setTimeout(() => this.flush(), INPUT_ACK_DEFER_MS);
  }

  /** The ack waiting for this session, if any, taken to ride on its output. */
  take(sessionId: string): number | undefined {
    const seq = this.waiting.get(sessionId);
    if (seq !== undefined) this.waiting.delete(sessionId);
    return seq;
  }

  /** Sends every ack still waiting, alone. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const [sessionId, seq] of this.waiting) this.sendAlone(sessionId, seq);
    this.waiting.clear();
  }

  /** The link is gone: nothing more is sent (the next hello carries what was written). */
  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.waiting.clear();
  }
}
