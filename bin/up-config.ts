import { z } from 'zod';
import { ENGINE_KEYS } from '../agent/config.js';
import { loadKeyFile } from '../core/auth/keys.js';
import { loggingKeys } from '../core/config/common.js';
import type { ConfigSpec } from '../core/config/load.js';
import {
  AUTH_KEYS,
  checkOidc,
  LIMIT_KEYS,
  LISTEN_KEYS,
  OIDC_KEYS,
  resolveGatewayKeys,
  type ResolvedGatewayKeys,
} from '../gateway/config.js';
import { NOTIFY_KEYS } from '../gateway/attention/notify-keys.js';

/**
 * The `tether up` schema: the gateway's keys (it always listens on 127.0.0.1) and the engine
 * keys of its one local agent. Logs default to warn: `up` is an interactive command.
 */
export const upSchema = z
  .object({ ...LISTEN_KEYS, ...AUTH_KEYS, ...OIDC_KEYS, ...ENGINE_KEYS, ...loggingKeys('warn'), ...LIMIT_KEYS, ...NOTIFY_KEYS })
  .strict();

/** `tether up`'s configuration after loading. */
export type UpConfig = ResolvedGatewayKeys<z.infer<typeof upSchema>>;

/** `tether up`: like the gateway's, and a key file must be able to sign (up mints the tokens). */
export const UP_CONFIG: ConfigSpec<typeof upSchema, UpConfig> = {
  program: 'up',
  schema: upSchema,
  finish: (c, ctx) => {
    if (c.keyFile !== undefined && c.auth === 'on' && !loadKeyFile(c.keyFile).signKey) {
      ctx.problem('keyFile', `${c.keyFile} holds a public key: tether up mints tokens and needs the private key or secret`);
    }
    checkOidc(c, ctx);
    return resolveGatewayKeys(c, ctx);
  },
};
