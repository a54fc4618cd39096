import { parseTtl } from '../../core/auth/duration.js';
import { LOGIN_CODE_TTL_SECONDS, MAX_LOGIN_CODE_TTL_SECONDS, mintLoginCode } from '../../core/auth/login-codes.js';
import { DEFAULT_GATEWAY_HOST, DEFAULT_GATEWAY_PORT } from '../../gateway/config.js';
import { required, type Command } from '../args.js';
import { KEY_OPTIONS, signingKeyFrom } from '../key-flags.js';
import { printSignIn, signInUrl } from '../sign-in-link.js';

/** The page address login-link assumes without --url (tether gateway's default listener). */
const DEFAULT_PAGE_URL = `http://${DEFAULT_GATEWAY_HOST}:${DEFAULT_GATEWAY_PORT}`;

/** `tether login-link`: mints a single-use web sign-in link with the gateway's key. */
export const loginLinkCommand: Command = {
  name: 'login-link',
  summary: 'print a single-use sign-in link (and QR code) for the web page',
  usage: `Usage: tether login-link --sub NAME [--scope SCOPE]... [--url http://HOST:PORT] [--ttl 5m] [--qr]
                         [--state-dir DIR | --key FILE]

Run on the gateway's server: signs a sign-in code with the gateway's key (the same state
folder or key file as tether gateway) and prints the web page's sign-in URL. Opening it
signs the browser tab in as NAME with a client token (valid 12 h, kept for that tab only).
The link works once and expires after --ttl; it is printed as a QR code too when --url is
not this machine (or with --qr).

Options:
  --sub NAME       who signs in (a person); shown in sessions, presence and audit
  --scope SCOPE    what the tab may do, repeatable (as tether token --scope; none = create +
                   control on every agent; view = read-only)
  --url URL        the gateway's web address as the browser reaches it (default ${DEFAULT_PAGE_URL})
  --ttl TTL        how long the link works, with unit s or m (default ${LOGIN_CODE_TTL_SECONDS / 60}m; at most ${MAX_LOGIN_CODE_TTL_SECONDS / 60}m)
  --qr             print the QR code even for a loopback address
  --state-dir DIR  state folder holding gateway-key.json (default ~/.tether; env TETHER_STATE_DIR)
  --key FILE       a key file instead (must be a private key or secret)
  -h, --help       show this help`,
  options: {
    sub: { type: 'string' },
    scope: { type: 'string', multiple: true },
    url: { type: 'string' },
    ttl: { type: 'string' },
    qr: { type: 'boolean' },
    ...KEY_OPTIONS,
  },
  async run(v) {
    const sub = required(v.sub as string | undefined, '--sub NAME');
    const key = signingKeyFrom(v, "run this on the gateway's server, with its --state-dir or --key");
    const ttl = v.ttl === undefined ? LOGIN_CODE_TTL_SECONDS : parseTtl(v.ttl as string);
    const code = await mintLoginCode(key, { sub, scopes: (v.scope as string[] | undefined) ?? [] }, ttl);
    const url = signInUrl((v.url as string | undefined) ?? DEFAULT_PAGE_URL, code);
    printSignIn((t) => process.stdout.write(t), url, ttl, v.qr === true ? true : undefined);
    return 0;
  },
};
