import { asTetherError, TetherError } from '../core/errors.js';
import type { TetherEvent } from '../core/protocol/events.js';
import type { NotificationParams } from '../core/protocol/methods.js';
import type { RpcPeer } from '../core/rpc/peer.js';
import type { TraceContext } from '../core/protocol/trace-context.js';

/** How long a posted prompt waits for its echo or result (as long as a request waits for its answer). */
export const POST_ANSWER_MS = 30_000;

interface Waiting {
  peer: RpcPeer;
  /** When it fails with DEADLINE_EXCEEDED (epoch ms). */
  deadline: number;
  settle: (r: 'applied' | 'duplicate' | TetherError) => void;
}

/**
 * One session's prompts sent as `session.post` (capability `session.post.v1`): no request,
 * so no answer message. A post is answered by the `prompt` event of its own input id
 * (applied: the gateway stored and queued it before echoing it), or by a
 * `session.post_result` (a duplicate, or refused); the loss of its connection fails it with
 * UNAVAILABLE, and the caller sends it again, same input id, on the next one.
 */
export class PromptPosts {
  /** In the order posted, so the first one is the next to pass its deadline. */
  private readonly waiting = new Map<string, Waiting>();
  /**
   * One timer for every post (a timer set and cleared per prompt cost more than the rest of
   * the post), left to run out when nothing waits. Unref'd: the connection keeps the process
   * up while posts wait, and its loss fails them.
   */
  private timer: NodeJS.Timeout | undefined;

  /** Posts one prompt on `peer`; settles as described above, or DEADLINE_EXCEEDED after {@link POST_ANSWER_MS}. */
  post(
    peer: RpcPeer,
    sessionId: string,
    inputId: string,
    line: Record<string, unknown>,
    trace?: TraceContext,
  ): Promise<'applied' | 'duplicate'> {
    return new Promise((resolve, reject) => {
      const earlier = this.waiting.get(inputId); // the same input posted again meanwhile: one answer settles both
      const w: Waiting = {
        peer,
        deadline: Date.now() + POST_ANSWER_MS,
        settle: (r) => {
          if (this.waiting.get(inputId) === w) this.waiting.delete(inputId);
          earlier?.settle(r);
          if (r instanceof TetherError) reject(r);
          else resolve(r);
        },
      };
      this.waiting.delete(inputId); // to the end, in deadline order
      this.waiting.set(inputId, w);
      this.timer ??= setTimeout(this.expire, POST_ANSWER_MS).unref();
      const params: NotificationParams<'session.post'> = { session_id: sessionId, input_id: inputId, line };
      if (trace) params.trace = trace;
      // No promise per prompt; when the post cannot go (closed, or over the frame limit) the
      // channel's own error says why, through notify.
      if (!peer.postNotification('session.post', params))
        peer.notify('session.post', params).catch((err) => w.settle(asTetherError(err, 'UNAVAILABLE')));
    });
  }

  /** Fails the posts past their deadline; runs again at the next one's. */
  private readonly expire = (): void => {
    this.timer = undefined;
    const now = Date.now();
    for (const w of this.waiting.values()) {
      if (w.deadline > now) {
        this.timer = setTimeout(this.expire, w.deadline - now).unref();
        return;
      }
      w.settle(new TetherError('DEADLINE_EXCEEDED', `session.post got no answer within ${POST_ANSWER_MS} ms`));
    }
  };

  /** A frame's event: the echo of one of our posts answers it. `principal`: who we are. */
  onEvent(event: TetherEvent, principal: string | undefined): void {
    if (event.subtype !== 'prompt' || event.input_id === undefined) return;
    if (principal !== undefined && event.principal !== principal) return; // input ids are ours only under our principal
    this.waiting.get(event.input_id)?.settle('applied');
  }

  onResult(r: NotificationParams<'session.post_result'>): void {
    this.waiting.get(r.input_id)?.settle(r.error ? TetherError.fromJsonRpc(r.error) : 'duplicate');
  }

  /** `peer`'s connection is gone: its posts fail with UNAVAILABLE, to be sent again. */
  linkLost(peer: RpcPeer): void {
    for (const w of [...this.waiting.values()])
      if (w.peer === peer) w.settle(new TetherError('UNAVAILABLE', 'the connection closed before the prompt was answered'));
  }

  /** The session is over: every post fails with `err`. */
  failAll(err: TetherError): void {
    for (const w of [...this.waiting.values()]) w.settle(err);
  }
}
