import { resolveStateDir } from '../../core/auth/state-dir.js';
import { TetherError } from '../../core/errors.js';
import { addRevocation, REVOCATION_POLL_MS, REVOCATIONS_FILE } from '../../gateway/door/revocations.js';
import type { Command } from '../args.js';

/** `tether revoke`: adds a token (by jti) or a subject to the state folder's revocation list. */
export const revokeCommand: Command = {
  name: 'revoke',
  summary: 'revoke a token (--jti) or every token of a subject (--sub); live connections are closed',
  usage: `Usage: tether revoke (--jti ID | --sub NAME) [--reason TEXT] [--state-dir DIR]

Adds a revocation to STATE_DIR/${REVOCATIONS_FILE} (kept across restarts). A gateway running
with that state folder reads it within ${REVOCATION_POLL_MS} ms, closes every live connection
that holds a matching token (PERMISSION_DENIED, WebSocket close 4403, "token revoked") and
refuses it from then on. A revocation by --sub also ends that subject's browser sign-ins
(every tab is signed out) and terminal sign-ins' tokens issued up to now. In a cluster that gateway publishes it to the cluster's store, and
every other gateway does the same within a second.

Options:
  --jti ID         revoke the one token with this jti (the token's "jti" claim)
  --sub NAME       revoke every token of this subject issued up to now; tokens minted for it
                   afterwards are accepted (re-issue after cutting someone off)
  --reason TEXT    a note kept with the entry
  --state-dir DIR  the gateway's state folder (default ~/.tether; env TETHER_STATE_DIR)
  -h, --help       show this help`,
  options: { jti: { type: 'string' }, sub: { type: 'string' }, reason: { type: 'string' }, 'state-dir': { type: 'string' } },
  async run(v) {
    const jti = v.jti as string | undefined;
    const sub = v.sub as string | undefined;
    if ((jti === undefined) === (sub === undefined))
      throw new TetherError('INVALID_ARGUMENT', 'give exactly one of --jti ID and --sub NAME');
    const stateDir = resolveStateDir(v['state-dir'] as string | undefined);
    const entry = addRevocation(stateDir, { jti, sub, reason: v.reason as string | undefined });
    process.stdout.write(`revoked: ${jti !== undefined ? `jti ${jti}` : `sub ${sub} (tokens issued up to ${entry.at})`}\n`);
    return 0;
  },
};
