import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ATTENTION_TYPES } from '../../core/protocol/attention.js';
import { loadableFile } from '../../core/config/common.js';
import { secretFile } from '../cluster/cluster-keys.js';

/** How a webhook's body is shaped: ours (JSON), a Slack-compatible incoming webhook's, or an ntfy JSON publish. */
export const WEBHOOK_FORMATS = ['json', 'slack', 'ntfy'] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

/** An http(s) URL (an operator's webhook may be plain http: the operator chose it). */
const webhookUrl = z.string().superRefine((url, ctx) => {
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
    ctx.addIssue({ code: 'custom', message: `must be an http(s) URL, got ${JSON.stringify(url.slice(0, 200))}` });
});

/** The VAPID subject unless the operator names one. */
export const DEFAULT_VAPID_SUBJECT = 'mailto:tether@localhost.invalid';

/** The VAPID key pair's file in the state folder. */
export const VAPID_FILE = 'vapid.json';
/** People's notification settings in the state folder. */
export const NOTIFY_PREFS_FILE = 'notify-prefs.json';

/** What `tether config --print` says above `webhooks`. */
const WEBHOOKS_NOTE = `webhooks the gateway posts attention events to, in the config file: [{ url, secretFile?, events?, format? }].
 events: any of ${ATTENTION_TYPES.join(', ')} (default all); format: json (default), slack (an incoming webhook) or ntfy
 (url = https://ntfy.example/TOPIC). Each POST is signed with the secret in secretFile: see docs/security.md.`;

/** The notification keys `tether gateway` and `tether up` share (issue #33). */
export const NOTIFY_KEYS = {
  webhook: z.array(webhookUrl).default([]).meta({
    help: 'post every attention event (signed JSON) to this URL; repeat for several (variable: comma-separated)',
    flag: 'webhook',
    secret: true, // a Slack or ntfy URL is itself the credential
  }),
  webhookSecretFile: loadableFile(secretFile).optional().meta({
    help: 'file holding the shared secret that signs --webhook POSTs (X-Tether-Signature); none: they go unsigned',
    flag: 'webhook-secret-file',
  }),
  webhooks: z
    .array(
      z
        .object({
          url: webhookUrl,
          secretFile: loadableFile(secretFile).optional(),
          events: z.array(z.enum(ATTENTION_TYPES)).min(1).optional(),
          format: z.enum(WEBHOOK_FORMATS).default('json'),
        })
        .strict(),
    )
    .default([])
    .meta({
      help: 'webhooks with their own secret, events and format, in the config file; see tether config --print',

      secret: true,
      note: WEBHOOKS_NOTE,
    }),
  webPush: z.boolean().default(true).meta({
    help: 'Web Push to browsers that opt in (VAPID keys made on first start in the state folder); false turns it off. Browsers push only to a page reached over https or on localhost',
  }),
  vapidSubject: z
    .string()
    .superRefine((s, ctx) => {
      if (!/^(mailto:[^@\s]+@[^@\s]+|https:\/\/\S+)$/.test(s))
        ctx.addIssue({
          code: 'custom',
          message: `must be a mailto: address or an https URL (push services contact it), got ${JSON.stringify(s)}`,
        });
    })
    .default(DEFAULT_VAPID_SUBJECT)
    .meta({ help: 'who push services may contact about this gateway (VAPID subject: mailto: or https URL)', flag: 'vapid-subject' }),
  notifyAllowHttpLoopback: z.boolean().default(false).meta({
    help: "people's own webhooks (set on the web page) may be http://127.0.0.1 or localhost besides https (testing only)",
    flag: 'notify-allow-http-loopback',
  }),
};

/** One webhook as the gateway posts to it. */
export interface WebhookTarget {
  url: string;
  /** The shared secret (never logged or printed); none: unsigned. */
  secret?: string;
  /** Undefined: every event type. */
  events?: readonly string[];
  format: WebhookFormat;
}

/** The operator's webhooks of a configuration: `--webhook` URLs (all events, JSON, the one secret file) and `webhooks` entries. */
export function operatorWebhooks(c: {
  webhook: string[];
  webhookSecretFile?: string;
  webhooks: z.infer<typeof NOTIFY_KEYS.webhooks>;
}): WebhookTarget[] {
  const read = (file: string | undefined) => (file ? readFileSync(file, 'utf8').trim() : undefined);
  const shared = read(c.webhookSecretFile);
  return [
    ...c.webhook.map((url) => ({ url, secret: shared, format: 'json' as const })),
    ...c.webhooks.map((w) => ({ url: w.url, secret: read(w.secretFile), events: w.events, format: w.format })),
  ];
}
