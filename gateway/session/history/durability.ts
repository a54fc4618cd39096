import type { SessionStore } from '../session-store.js';

/**
 * The one answer to "when may the gateway act on what it appended to the store": the gateway
 * builds one over its store and hands it to every agent link and session; nothing else asks
 * the store. With the memory store both answers come at once; with a store that writes (file,
 * JetStream) only once the write is confirmed, except that the cluster's store may let frames
 * be shown early while NATS is briefly away (bounded). Each call covers everything appended
 * so far, and calls made in order are answered in order.
 */
export class Durability {
  constructor(private readonly store: SessionStore) {}

  /**
   * Calls `ack` once the agent may be acked for everything appended so far: once it is
   * written, so an ack never outruns what a `kill -9` of the gateway would keep (the agent
   * lets go of what it acked). Synchronously when that is now.
   */
  mayAck(ack: () => void): void {
    this.store.whenWritten(ack);
  }

  /**
   * Calls `show` once what was appended so far may be shown: frames to members, an input to
   * the engine (the gateway keeps serving its own sessions under the same rule). Never later
   * than `mayAck` would; synchronously when that is now.
   */
  mayShow(show: () => void): void {
    if (this.store.whenShowable) this.store.whenShowable(show);
    else this.store.whenWritten(show);
  }
}
