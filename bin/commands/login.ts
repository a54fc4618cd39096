import { createHash, randomBytes } from 'node:crypto';
import { TetherError } from '../../core/errors.js';
import { CLI_TOKEN_PATH, DEVICE_PATH } from '../../core/protocol/http-paths.js';
import type { Command } from '../args.js';
import { gatewaysFrom } from '../connection-flags.js';
import { credentialsPath, forgetToken, gatewayOrigin, storeToken } from '../credentials.js';
import { listenForLogin } from '../login-listener.js';
import { openBrowser } from '../open-browser.js';

/** How long `tether login` waits for the browser to come back. */
const LOGIN_WAIT_MS = 5 * 60_000;
/** How long the gateway may take to trade the code. */
const TOKEN_REQUEST_MS = 15_000;

/** `tether login`: signs the terminal in through the browser, keeping a client token per gateway. */
export const loginCommand: Command = {
  name: 'login',
  summary: 'sign the terminal in to a gateway through your browser (keeps a client token in ~/.tether)',
  usage: `Usage: tether login [--gateway URL] [--no-browser | --device]

Opens the gateway's page in your browser (sign in there as usual: with your identity
provider or a sign-in link), asks you to allow the terminal, and hands the terminal a client
token for you through a listener on 127.0.0.1 (a one-time code it trades with a secret only
it holds). The token is kept in ~/.tether/credentials.json (mode 0600), per gateway, valid
7 days; every client command (run, chat, attach, sessions, agents, audit, acp) uses it for
that gateway. --token and TETHER_TOKEN still win. tether logout forgets it.
With --device (a machine without a browser) it prints the page's address and a code instead:
open the address on any device, sign in, and type the code there.

Options:
  --gateway URL    the gateway (ws://, wss://, http:// or https://; env TETHER_GATEWAY)
  --no-browser     print the address to open instead of opening a browser
  --device         sign in on another device: open the printed address there and type the code
  -h, --help       show this help`,
  options: { gateway: { type: 'string', multiple: true }, 'no-browser': { type: 'boolean' }, device: { type: 'boolean' } },
  async run(v) {
    const gateway = gatewaysFrom(v)[0];
    const page = gatewayOrigin(gateway);
    const body = v.device ? await deviceSignIn(page) : await loopbackSignIn(page, v['no-browser'] === true);
    if (!body.token) throw new TetherError('UNAUTHENTICATED', 'the gateway answered without a token');
    const expiresAt = new Date(Date.now() + (body.expires_in ?? 0) * 1000).toISOString();
    storeToken(gateway, { token: body.token, principal: body.principal ?? '', expires_at: expiresAt });
    process.stdout.write(`signed in to ${page} as ${body.principal} (token kept in ${credentialsPath()} until ${expiresAt})\n`);
    return 0;
  },
};

/** What the gateway's token endpoint answers. */
type TokenAnswer = {
  token?: string;
  expires_in?: number;
  principal?: string;
  pending?: boolean;
  error?: { code?: string; message?: string };
};

/** POSTs JSON to the gateway; resolves with its answer, or UNAUTHENTICATED saying what it refused. */
async function postJson(url: string, body: unknown): Promise<TokenAnswer & Record<string, unknown>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(TOKEN_REQUEST_MS),
  });
  const answer = (await res.json().catch(() => undefined)) as (TokenAnswer & Record<string, unknown>) | undefined;
  if (!res.ok || !answer)
    throw new TetherError('UNAUTHENTICATED', `the gateway refused the sign-in: ${answer?.error?.message ?? `HTTP ${res.status}`}`);
  return answer;
}

/** The browser on this machine signs in and hands the loopback listener a code; traded with the verifier only this process holds. */
async function loopbackSignIn(page: string, noBrowser: boolean): Promise<TokenAnswer> {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const state = randomBytes(16).toString('base64url');
  const listener = await listenForLogin(state, LOGIN_WAIT_MS);
  const url = `${page}/#cli-login=${listener.port}.${challenge}.${state}`;
  process.stdout.write(`open: ${url}\n`);
  if (!noBrowser) openBrowser(url);
  process.stderr.write('waiting for the browser (sign in there, then allow the terminal)…\n');
  const code = await listener.code;
  return postJson(`${page}${CLI_TOKEN_PATH}`, { code, code_verifier: verifier });
}

/** A person approves on any device by typing the printed code; this process polls until then (bounded by the code's life). */
async function deviceSignIn(page: string): Promise<TokenAnswer> {
  const start = await postJson(`${page}${DEVICE_PATH}`, {});
  const deviceCode = String(start.device_code);
  process.stdout.write(`open: ${page}/#device\ncode: ${String(start.user_code)}\n`);
  process.stderr.write('waiting for the code to be entered on the gateway’s page (signed in)…\n');
  const deadline = Date.now() + Number(start.expires_in) * 1000;
  const pauseMs = Math.max(1, Number(start.interval)) * 1000;
  while (Date.now() < deadline) {
    const answer = await postJson(`${page}${CLI_TOKEN_PATH}`, { device_code: deviceCode });
    if (!answer.pending) return answer;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  throw new TetherError('DEADLINE_EXCEEDED', 'nobody entered the code in time: run tether login --device again');
}

/** `tether logout`: forgets the terminal's token for a gateway. */
export const logoutCommand: Command = {
  name: 'logout',
  summary: 'forget the token tether login kept for a gateway',
  usage: `Usage: tether logout [--gateway URL]

Removes the gateway's client token from ~/.tether/credentials.json. (The token itself stays
valid until it expires; tether revoke on the gateway ends it at once.)

Options:
  --gateway URL    the gateway (env TETHER_GATEWAY)
  -h, --help       show this help`,
  options: { gateway: { type: 'string', multiple: true } },
  async run(v) {
    const gateway = gatewaysFrom(v)[0];
    const forgot = forgetToken(gateway);
    process.stdout.write(forgot ? `signed out of ${gatewayOrigin(gateway)}\n` : `no sign-in kept for ${gatewayOrigin(gateway)}\n`);
    return 0;
  },
};
