import { asTetherError } from '../errors.js';
import type { RpcPeer } from '../rpc/peer.js';

export interface HeartbeatOptions {
  /** How often to ping the peer. */
  intervalMs: number;
  /** How long a ping may go unanswered before the peer is declared dead. */
  timeoutMs: number;
}

/** threats.md part 3: every 15 s, dead after 10 s without an answer (detected within 25 s). */
export const HEARTBEAT_DEFAULTS: HeartbeatOptions = { intervalMs: 15_000, timeoutMs: 10_000 };

/**
 * Application-level liveness on one connection: a `ping` request every `intervalMs`; if one
 * is not answered within `timeoutMs`, `onDead` is called once with a reason and the heartbeat
 * stops. A half-open link (the peer stopped answering without closing) is thus found within
 * interval + timeout. An unanswered ping is forgiven while our send queue to the peer keeps
 * draining (the ping was stuck behind data, and the peer is reading) or while the peer's
 * bytes keep arriving (the answer is stuck behind its data: a 1 MiB frame over a 32 KB/s
 * link takes half a minute), in both cases measured over the ping's own lifetime, so a silent
 * peer is still found within interval + timeout. The second case relies on the peer's own
 * pings reaching us while our answer is held up: for links slow enough to hold a frame up
 * longer than `timeoutMs`, keep `timeoutMs` at least the peer's `intervalMs`. Stops by itself
 * when the channel closes; the returned function stops it earlier. Transport pings (ws ping,
 * gRPC keepalive) stay on as a backstop.
 */
export function startHeartbeat(peer: RpcPeer, opts: HeartbeatOptions, onDead: (reason: string) => void): () => void {
  let stopped = false;
  const stop = () => {
    stopped = true;
    clearInterval(timer);
  };
  const timer = setInterval(() => {
    if (stopped) return;
    // A ping goes out every interval even while an earlier one waits for its answer (at most
    // timeout / interval + 1 are out): the peer's forgiveness below counts on our pings
    // arriving at a steady pace while its own wait behind a backlog.
    const backlog = peer.channel.bufferedBytes;
    const received = peer.channel.receivedBytes;
    peer.request('ping', {}, { timeoutMs: opts.timeoutMs }).then(
      () => {},
      (err) => {
        if (stopped || peer.channel.isClosed) return;
        // The ping waits behind our own unsent data, or its answer behind the peer's: a peer
        // that keeps draining ours or sending us bytes is slow, not dead (the slow-consumer
        // limit deals with slow). Ping again next interval.
        if (backlog > 0 && peer.channel.bufferedBytes < backlog) return;
        if (peer.channel.receivedBytes > received) return;
        stop();
        const e = asTetherError(err);
        onDead(
          e.code === 'DEADLINE_EXCEEDED' ? `peer did not answer a heartbeat within ${opts.timeoutMs} ms` : `heartbeat failed: ${e.message}`,
        );
      },
    );
  }, opts.intervalMs);
  timer.unref();
  void peer.channel.closed.then(stop);
  return stop;
}
