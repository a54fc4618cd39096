import { codeFromHttpRefusal, ERROR_CODES, TetherError, type ErrorCode } from '../../core/errors.js';
import { NOTIFY_LOG_PATH, NOTIFY_TEST_PATH } from '../../core/protocol/http-paths.js';
import { pick, type Command } from '../args.js';
import { CONNECTION_OPTIONS, connectionHelp, gatewaysFrom } from '../connection-flags.js';
import { storedTokenFor } from '../credentials.js';

/** How long the gateway may take (a test waits for its deliveries, retries included). */
const NOTIFY_TIMEOUT_MS = 120_000;

/** The gateway's HTTP origin of a gateway URL (ws:// → http://, wss:// → https://; grpc is not HTTP). */
function httpOrigin(gateway: string): string {
  const u = new URL(gateway);
  if (u.protocol !== 'ws:' && u.protocol !== 'wss:' && u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new TetherError(
      'INVALID_ARGUMENT',
      `tether notify talks to the gateway's HTTP port: give its ws:// or wss:// URL, not ${u.protocol}//`,
    );
  return `${u.protocol === 'wss:' || u.protocol === 'https:' ? 'https' : 'http'}://${u.host}`;
}

/** `tether notify test --sub NAME` and `tether notify log`: the admin's side of notifications (issue #33). */
export const notifyCommand: Command = {
  name: 'notify',
  summary: "notifications: send a test to a person's browsers and webhooks, or read the delivery log (admin)",
  usage: `Usage: tether notify test --sub NAME [connection options]
       tether notify log [--json] [connection options]

  test   sends a test notification to NAME's push subscriptions (browsers that said "Notify me")
         and own webhooks, waits for the deliveries (retries included) and prints how each went
  log    prints the gateway's delivery log (the last 500): when, event, channel, where
         (an origin only: a webhook's path may be its credential), whose, outcome, attempts

Both need a token with the admin scope.

Options:
${connectionHelp(19)}
  --sub NAME       (test) whose browsers and webhooks
  --json           print JSON
  -h, --help       show this help`,
  options: { ...CONNECTION_OPTIONS, sub: { type: 'string' }, json: { type: 'boolean' } },
  allowPositionals: true,
  async run(v, positionals) {
    const what = positionals[0];
    if (what !== 'test' && what !== 'log')
      throw new TetherError('INVALID_ARGUMENT', 'say tether notify test --sub NAME, or tether notify log');
    const gateways = gatewaysFrom(v);
    const token = pick(v.token, 'TETHER_TOKEN') ?? storedTokenFor(gateways);
    const sub = v.sub as string | undefined;
    if (what === 'test' && !sub) throw new TetherError('INVALID_ARGUMENT', 'tether notify test needs --sub NAME');
    const res = await fetch(`${httpOrigin(gateways[0])}${what === 'test' ? NOTIFY_TEST_PATH : NOTIFY_LOG_PATH}`, {
      method: what === 'test' ? 'POST' : 'GET',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: what === 'test' ? JSON.stringify({ sub }) : undefined,
      signal: AbortSignal.timeout(NOTIFY_TIMEOUT_MS),
    }).catch((err: Error) => {
      throw new TetherError('UNAVAILABLE', `the gateway did not answer: ${err.message}`);
    });
    const body = (await res.json().catch(() => ({}))) as {
      deliveries?: Record<string, unknown>[];
      error?: { code?: string; message?: string };
    };
    if (!res.ok) {
      const named = body.error?.code;
      const code = named && (ERROR_CODES as readonly string[]).includes(named) ? (named as ErrorCode) : codeFromHttpRefusal(res.status);
      throw new TetherError(code, body.error?.message ?? `HTTP ${res.status}`);
    }
    const rows = body.deliveries ?? [];
    if (v.json) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    else if (!rows.length) process.stdout.write(what === 'test' ? `${sub} has no browsers or webhooks to notify\n` : 'no deliveries yet\n');
    else
      for (const r of rows)
        process.stdout.write(
          `${r.at} ${r.type} ${r.channel} ${r.target}${r.principal ? ` (${r.principal})` : ''}: ${r.outcome} after ${r.attempts} attempt(s)${r.status ? `, HTTP ${r.status}` : r.error ? `, ${r.error}` : ''}\n`,
        );
    return what === 'test' && rows.some((r) => r.outcome !== 'sent') ? 1 : 0;
  },
};
