import { createHmac } from 'node:crypto';
import { ATTENTION_TITLES, type AttentionEvent } from '../../core/protocol/attention.js';
import type { WebhookFormat } from './notify-keys.js';

/** The headers of a signed POST (docs/security.md, "Webhooks"). */
export const TIMESTAMP_HEADER = 'x-tether-timestamp';
export const SIGNATURE_HEADER = 'x-tether-signature';

/**
 * `X-Tether-Timestamp` (Unix seconds) and `X-Tether-Signature: sha256=<hex HMAC-SHA256 of
 * "<timestamp>.<body>">`: a receiver recomputes it over the raw body and refuses an old timestamp (replay).
 */
export function signatureHeaders(secret: string, body: string, nowMs = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000));
  const mac = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return { [TIMESTAMP_HEADER]: timestamp, [SIGNATURE_HEADER]: `sha256=${mac}` };
}

/** What one POST carries: where it goes and its JSON body. */
export interface WebhookRequest {
  url: string;
  body: string;
}

/** ntfy priorities: prompts are urgent-ish (4), the rest default (3). */
const NTFY_PRIORITY: Record<AttentionEvent['type'], number> = {
  permission_request: 4,
  question: 4,
  turn_complete: 3,
  session_ended: 3,
  agent_lost: 3,
  budget: 3,
};

/**
 * The POST for one event in a webhook's format: `json`, the event itself; `slack`, a
 * Slack-compatible incoming webhook's `{text, blocks}`; `ntfy`, a JSON publish to the server's
 * root naming the topic (the URL's path), with title, priority and tags. `link`: the session's
 * page, when the gateway knows its public origin.
 */
export function shapeWebhook(format: WebhookFormat, url: string, event: AttentionEvent, link?: string): WebhookRequest {
  const title = `${ATTENTION_TITLES[event.type]}: ${event.agent}`;
  if (format === 'slack') {
    const text = `*${title}*\n${event.summary}${event.tool ? ` (\`${event.tool}\`)` : ''}${link ? `\n<${link}|Open the session>` : ''}`;
    return {
      url,
      body: JSON.stringify({ text: `${title}: ${event.summary}`, blocks: [{ type: 'section', text: { type: 'mrkdwn', text } }] }),
    };
  }
  if (format === 'ntfy') {
    const u = new URL(url);
    const topic = u.pathname.replace(/^\/+|\/+$/g, '');
    return {
      url: `${u.origin}/`,
      body: JSON.stringify({
        topic,
        title,
        message: event.summary,
        priority: NTFY_PRIORITY[event.type],
        tags: [event.type],
        ...(link ? { click: link } : {}),
      }),
    };
  }
  return { url, body: JSON.stringify(event) };
}

/** A webhook URL as logs and the delivery log show it: its origin only (a Slack or ntfy path is itself a secret). */
export function redactedUrl(url: string): string {
  try {
    return `${new URL(url).origin}/…`;
  } catch {
    return '(invalid URL)';
  }
}
