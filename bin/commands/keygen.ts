import { resolve } from 'node:path';
import { generateTokenKey, writeKeyFile } from '../../core/auth/keygen.js';
import { TOKEN_ALGS, type TokenAlg } from '../../core/auth/keys.js';
import { resolveStateDir, stateKeyPath } from '../../core/auth/state-dir.js';
import { TetherError } from '../../core/errors.js';
import type { Command } from '../args.js';

/** `tether keygen`: writes a new signing key (JWK, mode 0600) and prints the public JWK of an asymmetric one. */
export const keygenCommand: Command = {
  name: 'keygen',
  summary: 'write a new key for signing and verifying tokens',
  usage: `Usage: tether keygen [--alg HS256|EdDSA|ES256|RS256] [--out FILE | --state-dir DIR] [--force]

Writes a new signing key as a JWK (file mode 0600): to FILE, or to the state folder's
gateway-key.json (default ~/.tether, env TETHER_STATE_DIR), which tether gateway and tether up
use. Prints the key's path on stderr. For an asymmetric key, prints its public JWK on stdout:
save it to a file and give that to gateways that only verify (tether gateway --key FILE).

Options:
  --alg ALG          HS256 (default: a shared secret), EdDSA (Ed25519), ES256 (P-256) or RS256
  --out FILE         where to write the key
  --state-dir DIR    write the state folder's key instead (default ~/.tether)
  --force            replace an existing key (tokens signed with the old one stop working)
  -h, --help         show this help`,
  options: {
    alg: { type: 'string' },
    out: { type: 'string' },
    'state-dir': { type: 'string' },
    force: { type: 'boolean' },
  },
  async run(v) {
    const alg = (v.alg as string | undefined) ?? 'HS256';
    if (!(TOKEN_ALGS as readonly string[]).includes(alg))
      throw new TetherError('INVALID_ARGUMENT', `--alg must be one of ${TOKEN_ALGS.join(', ')}, got "${alg}"`);
    if (v.out && v['state-dir']) throw new TetherError('INVALID_ARGUMENT', 'use --out or --state-dir, not both');
    const path = v.out ? resolve(v.out as string) : stateKeyPath(resolveStateDir(v['state-dir'] as string | undefined));
    const generated = generateTokenKey(alg as TokenAlg);
    writeKeyFile(path, generated.privateJwk, { force: v.force === true });
    process.stderr.write(`key: ${path} (${alg}, kid ${generated.key.kid})\n`);
    if (generated.publicJwk) process.stdout.write(JSON.stringify(generated.publicJwk) + '\n');
    return 0;
  },
};
