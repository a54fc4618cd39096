import type { AttemptResult } from './delivery.js';
import type { PushSubscriptionRecord } from './notify-prefs.js';
import type { VapidKeys } from './vapid-keys.js';

/** How long a push service keeps a message for an offline browser (a prompt expires long before). */
export const PUSH_TTL_SECONDS = 3600;

/**
 * Sends one Web Push message: the payload encrypted for the subscription (RFC 8291, aes128gcm)
 * and signed with the gateway's VAPID key (RFC 8292), both by `web-push`; the request itself
 * goes through fetch so a push service stand-in on loopback can be plain http in tests.
 * `topic` (the event id) lets a push service replace a message not yet delivered.
 */
export class PushSender {
  constructor(
    private readonly vapid: VapidKeys,
    private readonly subject: string,
  ) {}

  get publicKey(): string {
    return this.vapid.publicKey;
  }

  async send(sub: PushSubscriptionRecord, payload: string, topic: string, signal: AbortSignal): Promise<AttemptResult> {
    // web-push loads with the first message sent, not with every gateway that could send one.
    const { default: webpush } = await import('web-push');
    const d = webpush.generateRequestDetails({ endpoint: sub.endpoint, keys: sub.keys }, payload, {
      vapidDetails: { subject: this.subject, publicKey: this.vapid.publicKey, privateKey: this.vapid.privateKey },
      TTL: PUSH_TTL_SECONDS,
      topic,
      urgency: 'high',
    });
    const res = await fetch(d.endpoint, {
      method: d.method,
      headers: d.headers as Record<string, string>,
      body: d.body ? new Uint8Array(d.body) : undefined,
      signal,
    });
    await res.arrayBuffer().catch(() => undefined);
    return { status: res.status };
  }
}
