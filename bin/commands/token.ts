import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { MAX_TTL_SECONDS, parseTtl } from '../../core/auth/duration.js';
import { mintToken } from '../../core/auth/mint.js';
import { TetherError } from '../../core/errors.js';
import { required, type Command } from '../args.js';
import { KEY_OPTIONS, signingKeyFrom } from '../key-flags.js';

/** A minted token's lifetime without --ttl. */
const DEFAULT_TOKEN_TTL = '1h';

/** `tether token`: mints an agent or client token with the gateway's key and prints only the token. */
export const tokenCommand: Command = {
  name: 'token',
  summary: 'mint a token for an agent or a client with the gateway key',
  usage: `Usage: tether token [--state-dir DIR | --key FILE] --role agent|client --sub NAME [--agent NAME]
                    [--scope SCOPE]... [--ttl 1h] [--out FILE]

Signs a token with the gateway's key (the state folder tether gateway --state-dir uses, same
default ~/.tether; or a key file) and prints only the token (or writes it to --out FILE).

Options:
  --state-dir DIR  state folder holding gateway-key.json (default ~/.tether; env TETHER_STATE_DIR)
  --key FILE       a key file instead (JWK or PEM; must be a private key or secret)
  --role ROLE      agent (registers as one agent) or client (opens and drives sessions)
  --sub NAME       who the token is for (a person, service or machine); shown in sessions and audit
  --agent NAME     agent tokens: the agent name it may register as (default: --sub)
  --scope SCOPE    client tokens, repeatable; none = create + control on every agent. Scopes:
                     agent:NAME   only this agent (repeat for more); agent:* = every agent
                     view         list and attach read-only
                     create       open sessions
                     control      send prompts, answer permission prompts, interrupt, stop
                     admin        see every agent and session
                   With agent: scopes only, the actions are create + control; with action
                   scopes, exactly those (view is always included)
  --ttl TTL        lifetime, with unit s, m, h or d (default ${DEFAULT_TOKEN_TTL}; at most ${MAX_TTL_SECONDS / 86_400}d). A token is
                   checked on every connect: unattended agents need one that outlives restarts
  --out FILE       write the token to FILE (mode 0600, replaced atomically) instead of stdout,
                   e.g. for tether agent --token-file FILE
  -h, --help       show this help`,
  options: {
    ...KEY_OPTIONS,
    role: { type: 'string' },
    sub: { type: 'string' },
    agent: { type: 'string' },
    scope: { type: 'string', multiple: true },
    ttl: { type: 'string' },
    out: { type: 'string' },
  },
  async run(v) {
    const role = required(v.role as string | undefined, '--role (agent or client)');
    if (role !== 'agent' && role !== 'client') throw new TetherError('INVALID_ARGUMENT', `--role must be agent or client, got "${role}"`);
    const sub = required(v.sub as string | undefined, '--sub NAME');
    const key = signingKeyFrom(v, 'start tether gateway or tether up once with this state folder, or run tether keygen');
    const token = await mintToken({
      key,
      kind: role,
      sub,
      agent: v.agent as string | undefined,
      scopes: (v.scope as string[] | undefined) ?? [],
      ttlSeconds: parseTtl((v.ttl as string | undefined) ?? DEFAULT_TOKEN_TTL),
    });
    const out = v.out as string | undefined;
    if (out) {
      mkdirSync(dirname(out), { recursive: true, mode: 0o700 });
      writeFileSync(`${out}.tmp`, token + '\n', { mode: 0o600 });
      renameSync(`${out}.tmp`, out);
      process.stderr.write(`token: written to ${out}\n`);
    } else {
      process.stdout.write(token + '\n');
    }
    return 0;
  },
};
