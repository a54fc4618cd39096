import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../core/logging.js';
import { AttentionDesk } from '../gateway/attention/attention-desk.js';
import { Notifier } from '../gateway/attention/notifier.js';
import { NOTIFY_PREFS_FILE, operatorWebhooks, VAPID_FILE, type NOTIFY_KEYS } from '../gateway/attention/notify-keys.js';
import { FilePrefsStore, type PrefsStore } from '../gateway/attention/notify-prefs.js';
import { PushSender } from '../gateway/attention/push-sender.js';
import { newVapidKeys, vapidKeysAt, type VapidKeys } from '../gateway/attention/vapid-keys.js';
import type { SharedNotify } from '../gateway/cluster/shared-notify.js';
import type { Gateway } from '../gateway/gateway.js';
import type { z } from 'zod';

/** The notification keys of a configuration, parsed. */
type NotifyConfig = z.infer<z.ZodObject<typeof NOTIFY_KEYS>> & { stateDir: string };

/**
 * The attention room of a gateway the CLI starts: the operator's webhooks, people's settings
 * and the VAPID keys in the state folder (made on first start), or in a cluster (`shared`) the
 * cluster's, over the gateway's sessions. `origin`: the page's origin for links, once the gateway listens.
 */
export async function attentionFor(
  c: NotifyConfig,
  gateway: Gateway,
  logger: Logger,
  origin: () => string | undefined,
  shared?: SharedNotify,
): Promise<AttentionDesk> {
  const log = logger.child({ component: 'notify' });
  const vapid = c.webPush ? await vapidKeysOf(c, log, shared) : undefined;
  const prefs: PrefsStore = shared ? await shared.prefsStore() : new FilePrefsStore(join(c.stateDir, NOTIFY_PREFS_FILE));
  const notifier = new Notifier({
    webhooks: operatorWebhooks(c),
    prefs,
    push: vapid ? new PushSender(vapid, c.vapidSubject) : undefined,
    metrics: gateway.metrics,
    logger: log,
    origin,
  });
  return new AttentionDesk(gateway.directory, notifier, { allowHttpLoopback: c.notifyAllowHttpLoopback, budgets: gateway.usage });
}

/**
 * Standalone: the state folder's pair (made on first start). In a cluster: the pair the first
 * gateway claimed; this one offers its own file's pair, if it has one, else a fresh one.
 */
async function vapidKeysOf(c: NotifyConfig, log: Logger, shared: SharedNotify | undefined): Promise<VapidKeys> {
  const file = join(c.stateDir, VAPID_FILE);
  if (!shared) {
    const made = vapidKeysAt(file);
    if (made.created) log.info({ file }, 'VAPID keys made for Web Push');
    return made.keys;
  }
  const own = existsSync(file) ? vapidKeysAt(file).keys : undefined;
  const { keys, claimed } = await shared.claimVapid(own ?? newVapidKeys());
  if (claimed) log.info('VAPID keys claimed for the whole cluster');
  // Browsers subscribed with this gateway's own pair before it joined must subscribe again.
  else if (own && own.publicKey !== keys.publicKey)
    log.warn(
      { file },
      "this gateway's VAPID keys differ from the cluster's: browsers subscribed through it before it joined must turn push on again",
    );
  return keys;
}
