/**
 * Whether a peer has shown signs of life lately: bytes of it arriving, or our data to it
 * draining. Liveness checks (the application heartbeat, WebSocket pings) sample it at each
 * tick and consult it when an answer is late: over a slow link, an answer can wait behind a
 * backlog in either direction for longer than any ping timeout, and the peer is slow, not dead.
 */
export class PeerProgress {
  private received: number;
  private buffered: number;
  private lastAt: number;

  constructor(
    private readonly channel: { readonly receivedBytes: number; readonly bufferedBytes: number },
    private readonly now: () => number = Date.now,
  ) {
    this.received = channel.receivedBytes;
    this.buffered = channel.bufferedBytes;
    this.lastAt = now();
  }

  /** Notes progress since the last sample: more bytes received, or our backlog shrank. */
  sample(): void {
    const { receivedBytes, bufferedBytes } = this.channel;
    if (receivedBytes > this.received || bufferedBytes < this.buffered) this.lastAt = this.now();
    this.received = receivedBytes;
    this.buffered = bufferedBytes;
  }

  /** Samples, then says whether there was progress within the last `windowMs`. */
  within(windowMs: number): boolean {
    this.sample();
    return this.now() - this.lastAt <= windowMs;
  }
}
