import { join } from 'node:path';
import type { Logger } from '../core/logging.js';
import { AttentionDesk } from '../gateway/attention/attention-desk.js';
import { Notifier } from '../gateway/attention/notifier.js';
import { NOTIFY_PREFS_FILE, operatorWebhooks, VAPID_FILE, type NOTIFY_KEYS } from '../gateway/attention/notify-keys.js';
import { FilePrefsStore } from '../gateway/attention/notify-prefs.js';
import { PushSender } from '../gateway/attention/push-sender.js';
import { vapidKeysAt } from '../gateway/attention/vapid-keys.js';
import type { Gateway } from '../gateway/gateway.js';
import type { z } from 'zod';

/** The notification keys of a configuration, parsed. */
type NotifyConfig = z.infer<z.ZodObject<typeof NOTIFY_KEYS>> & { stateDir: string };

/**
 * The attention room of a gateway the CLI starts: the operator's webhooks, people's settings
 * and the VAPID keys in the state folder (made on first start), over the gateway's sessions.
 * `origin`: the page's origin for links, once the gateway listens.
 */
export function attentionFor(c: NotifyConfig, gateway: Gateway, logger: Logger, origin: () => string | undefined): AttentionDesk {
  const log = logger.child({ component: 'notify' });
  const vapid = c.webPush ? vapidKeysAt(join(c.stateDir, VAPID_FILE)) : undefined;
  if (vapid?.created) log.info({ file: join(c.stateDir, VAPID_FILE) }, 'VAPID keys made for Web Push');
  const notifier = new Notifier({
    webhooks: operatorWebhooks(c),
    prefs: new FilePrefsStore(join(c.stateDir, NOTIFY_PREFS_FILE)),
    push: vapid ? new PushSender(vapid.keys, c.vapidSubject) : undefined,
    metrics: gateway.metrics,
    logger: log,
    origin,
  });
  return new AttentionDesk(gateway.directory, notifier, { allowHttpLoopback: c.notifyAllowHttpLoopback, budgets: gateway.usage });
}
