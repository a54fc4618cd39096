/**
 * The paths of the gateway's HTTP port that clients reach (docs/protocol.md): one definition
 * for the listeners that serve them and the dialers that open them.
 */

/** Where agents and clients open their WebSocket (a bare ws://HOST:PORT means this path). */
export const WS_PATH = '/v1/connect';
/** POST: a one-time browser ticket for a client token. */
export const TICKET_PATH = '/v1/ticket';
/** POST: a web sign-in code traded for a client token (GET: whether sign-in by link is on). */
export const LOGIN_PATH = '/v1/login';
/** GET: starts a sign-in with the gateway's identity provider (a redirect to it). */
export const OIDC_START_PATH = '/v1/oidc/start';
/** GET: where the identity provider sends the browser back (the redirect URI to register). */
export const OIDC_CALLBACK_PATH = '/v1/oidc/callback';
/** POST: ends this browser's sign-in, in every tab. */
export const LOGOUT_PATH = '/v1/logout';
/** POST: the signed-in page hands `tether login` a one-time code (answer: the loopback URL to go to). */
export const CLI_LOGIN_PATH = '/v1/cli-login';
/** POST: `tether login` trades that code and its verifier for a client token. */
export const CLI_TOKEN_PATH = '/v1/cli-token';
/** POST: `tether login --device` starts a sign-in a person approves on another device (answer: the device code and the code to type). */
export const DEVICE_PATH = '/v1/device';
/** POST: the signed-in page approves a `tether login --device` by the code the terminal shows. */
export const DEVICE_APPROVE_PATH = '/v1/device/approve';
/** GET or POST: this person's notification settings and the gateway's VAPID key; the paths below change them. */
export const NOTIFY_SETTINGS_PATH = '/v1/notify/settings';
/** POST: a browser opts in to Web Push (its PushSubscription); DELETE (body {endpoint}): it opts out. */
export const NOTIFY_SUBSCRIPTIONS_PATH = '/v1/notify/subscriptions';
/** POST: a person adds a webhook of their own (answer: its secret, once); DELETE (body {id}): removes it. */
export const NOTIFY_WEBHOOKS_PATH = '/v1/notify/webhooks';
/** POST {id, decision: allow|deny}: answers a prompt from its notification (the service worker). */
export const NOTIFY_ANSWER_PATH = '/v1/notify/answer';
/** GET (admin): the delivery log. */
export const NOTIFY_LOG_PATH = '/v1/notify/log';
/** POST {sub} (admin): a test notification to that person's browsers and webhooks. */
export const NOTIFY_TEST_PATH = '/v1/notify/test';
/** POST {session_id, visible}: the page says whether its tab on a session is in sight (a hidden tab does not stop a push). */
export const NOTIFY_VISIBILITY_PATH = '/v1/notify/visibility';
