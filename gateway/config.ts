import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { JWKS_DEFAULTS } from '../core/auth/jwks.js';
import { loadKeyFile } from '../core/auth/keys.js';
import { DEFAULT_STATE_DIR } from '../core/auth/state-dir.js';
import { CHANNEL_DEFAULTS } from '../core/channel/channel.js';
import { checkedString, loadableFile, loggingKeys, portKey, positiveInt } from '../core/config/common.js';
import { pemFile } from '../core/config/tls-keys.js';
import type { ConfigSpec, FinishContext } from '../core/config/load.js';
import { GATEWAY_DEFAULTS, type GatewayLimits } from './gateway.js';
import { DOOR_DEFAULTS, type DoorLimits } from './door/door-limits.js';
import { readPolicyFile } from './policy/policy-source.js';
import { AUDIT_ROTATION_DEFAULTS } from './audit/audit-log.js';
import { MEMBERSHIP_RATE_DEFAULTS } from './audit/audit-rate.js';
import { DEFAULT_USAGE_RETENTION_DAYS } from './usage/usage-ledger.js';
import { DEFAULT_USAGE_LABEL_CAP } from './usage/usage-metrics.js';
import { checkClusterKeys, CLUSTER_KEYS, secretFile } from './cluster/cluster-keys.js';
import { checkScopes } from '../core/auth/scopes.js';
import { BROWSER_SESSION_DEFAULTS } from './door/browser-sessions.js';
import { OIDC_DEFAULTS } from './door/oidc-defaults.js';
import { NOTIFY_KEYS } from './attention/notify-keys.js';
import { AUDIT_FILE } from './audit/audit-reader.js';

/** Where the gateway listens unless told otherwise: this machine only. */
export const DEFAULT_GATEWAY_HOST = '127.0.0.1';
/** WebSocket/HTTP port (WebSocket at /v1/connect, health, metrics and tickets beside it). */
export const DEFAULT_GATEWAY_PORT = 7800;
/** gRPC port (0 instead when the HTTP port is 0: both then pick free ports). */
export const DEFAULT_GRPC_PORT = 7801;

/** Where the gateway listens. */
export const LISTEN_KEYS = {
  port: portKey().default(DEFAULT_GATEWAY_PORT).meta({ help: 'WebSocket/HTTP port (0 picks a free port)', flag: 'port' }),
  grpcPort: portKey()
    .nullable()
    .optional()
    .meta({ help: `gRPC port (default ${DEFAULT_GRPC_PORT}, or 0 when port is 0); off (null) runs no gRPC listener`, flag: 'grpc-port' }),
};

/** How connections are authenticated and where the gateway keeps its state. */
export const AUTH_KEYS = {
  stateDir: z.string().min(1).optional().meta({
    help: 'folder for the gateway key (created on first run), sessions and the audit trail (default ~/.tether)',
    flag: 'state-dir',
  }),
  keyFile: loadableFile(loadKeyFile)
    .optional()
    .meta({ help: "verify (and, for up, mint) tokens with this key instead of the state folder's: a JWK or PEM file", flag: 'key' }),
  jwksUrl: z
    .string()
    .superRefine((url, ctx) => {
      if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url))
        ctx.addIssue({ code: 'custom', message: `must be an http(s) URL, got ${JSON.stringify(url)}` });
    })
    .optional()
    .meta({
      help: `also accept tokens signed by keys of this JWKS (fetch timeout ${JWKS_DEFAULTS.timeoutMs / 1000} s, cached ${JWKS_DEFAULTS.cacheMaxAgeMs / 60_000} min)`,
      flag: 'jwks-url',
    }),
  auth: z.enum(['on', 'off']).default('on').meta({ help: 'off admits everyone without a token: trusted local use only', flag: 'auth' }),
  allowOrigins: z
    .array(
      z.string().superRefine((origin, ctx) => {
        if (!isOrigin(origin))
          ctx.addIssue({
            code: 'custom',
            message: `must be an origin like https://app.example.com[:port] (no path), got ${JSON.stringify(origin)}`,
          });
      }),
    )
    .default([])
    .meta({
      help: "browser origins allowed to connect besides the gateway's own http://HOST:PORT (variable: comma-separated)",
      flag: 'allow-origin',
    }),
  policy: loadableFile(readPolicyFile).optional().meta({
    help: 'central policy file, JSON or YAML (permissions deny/ask/allow, maxPermissionMode, models, workingFolders); reloaded on change and on SIGHUP',
    flag: 'policy',
  }),
  auditLog: z
    .string()
    .min(1)
    .optional()
    .meta({ help: `audit trail, JSON lines (default STATE_DIR/${AUDIT_FILE})`, flag: 'audit-log' }),
  audit: z
    .object({
      maxFileBytes: z.number().int().min(4096).default(AUDIT_ROTATION_DEFAULTS.maxFileBytes).meta({
        help: 'the audit file is rotated (FILE.1, FILE.2, …) before a record takes it past this size',
        flag: 'audit-max-file-bytes',
      }),
      keepFiles: positiveInt(AUDIT_ROTATION_DEFAULTS.keepFiles, 'rotated audit files kept; the oldest beyond are removed').meta({
        help: 'rotated audit files kept; the oldest beyond are removed',
        flag: 'audit-keep-files',
      }),
      retentionDays: z
        .number()
        .int()
        .nonnegative()
        .default(AUDIT_ROTATION_DEFAULTS.retentionDays)
        .meta({ help: 'rotated audit files older than this many days are removed (0: kept by count only)', flag: 'audit-retention-days' }),
      membershipPerMinute: positiveInt(MEMBERSHIP_RATE_DEFAULTS.perWindow, '').meta({
        help: 'attach and detach records one principal may cause per minute; past it they are counted in one summary record per session a minute',
        flag: 'audit-membership-per-minute',
      }),
    })
    .strict()
    .prefault({}),
  metrics: z.boolean().default(true).meta({ help: 'serve Prometheus metrics at GET /metrics on the HTTP port' }),
  usage: z
    .object({
      retentionDays: positiveInt(DEFAULT_USAGE_RETENTION_DAYS, '').meta({
        help: 'turns are kept in the usage ledger (STATE_DIR/usage.jsonl; in a cluster the TETHER_USAGE stream) this many days',
        flag: 'usage-retention-days',
      }),
      metricsByPrincipal: z.boolean().default(false).meta({
        help: 'label the usage counters of /metrics with the principal too (people as a label; off by default)',
        flag: 'usage-metrics-by-principal',
      }),
      metricsLabelCap: positiveInt(DEFAULT_USAGE_LABEL_CAP, '').meta({
        help: 'distinct agents, models and principals the usage counters label; further ones count as "other"',
        flag: 'usage-metrics-label-cap',
      }),
    })
    .strict()
    .prefault({}),
};

/** What `tether config --print` says above `oidc.scopes`. */
const OIDC_SCOPES_NOTE = `who may use the gateway after signing in with the identity provider: { "<group or claim value>": [scopes] }.
 A person gets the union of the scopes of every key that is one of their groups (the groupsClaim claim) or their principal
 (the principalClaim claim, e.g. an email); "*" matches everyone. Scopes: view, create, control, admin, agent:NAME (agent:* every agent).
 Someone matching no key is refused. Example: { "platform-team": ["control", "create", "agent:buildbox"], "everyone": ["view"] }`;

/** Sign-in with an identity provider (OpenID Connect) and the browser sign-in cookie. */
export const OIDC_KEYS = {
  oidc: z
    .object({
      issuer: z
        .string()
        .superRefine((url, ctx) => {
          const u = URL.canParse(url) ? new URL(url) : undefined;
          const loopback = u?.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname);
          if (!u || (u.protocol !== 'https:' && !loopback))
            ctx.addIssue({ code: 'custom', message: `must be an https URL (http only on this machine), got ${JSON.stringify(url)}` });
        })
        .optional()
        .meta({
          help: 'the identity provider\'s issuer URL (OpenID Connect discovery): the page offers "Sign in with NAME"',
          flag: 'oidc-issuer',
        }),
      clientId: z.string().min(1).optional().meta({
        help: 'the client id registered with the identity provider (redirect URI: https://HOST:PORT/v1/oidc/callback)',
        flag: 'oidc-client-id',
      }),
      clientSecretFile: loadableFile(secretFile).optional().meta({
        help: 'file holding the client secret (or TETHER_OIDC_CLIENT_SECRET); none: a public client (PKCE only)',
        flag: 'oidc-client-secret-file',
      }),
      clientSecret: z
        .string()
        .min(1)
        .optional()
        .meta({ help: 'the client secret (no flag: a command line is visible to every user)', secret: true }),
      principalClaim: z
        .string()
        .min(1)
        .default('sub')
        .meta({ help: 'the ID token claim that names the person (e.g. email); audit records keep it', flag: 'oidc-principal-claim' }),
      groupsClaim: z
        .string()
        .min(1)
        .default('groups')
        .meta({ help: "the claim listing the person's groups, matched against oidc.scopes", flag: 'oidc-groups-claim' }),
      name: z
        .string()
        .min(1)
        .max(64)
        .optional()
        .meta({ help: "the identity provider's name on the page's button (default the issuer's host)", flag: 'oidc-name' }),
      redirectUri: z
        .string()
        .superRefine((url, ctx) => {
          if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
            ctx.addIssue({ code: 'custom', message: `must be an http(s) URL, got ${JSON.stringify(url)}` });
        })
        .optional()
        .meta({
          help: 'the redirect URI registered with the identity provider, when the gateway is reached through another address (a proxy); default its own origin + /v1/oidc/callback',
          flag: 'oidc-redirect-uri',
        }),
      requestScopes: z
        .array(z.string().min(1))
        .default(OIDC_DEFAULTS.requestScopes)
        .meta({ help: 'the OAuth scopes asked of the identity provider' }),
      scopes: z
        .record(
          z.string().min(1),
          z.preprocess(
            (v) => (typeof v === 'string' ? v.split(/\s+/).filter(Boolean) : v), // a variable's GROUP=SCOPE SCOPE
            z.array(checkedString((scope) => checkScopes([scope]))).min(1),
          ),
        )
        .default({})
        .meta({
          help: 'group or claim value → scopes, in the config file (in the variable: GROUP=SCOPE SCOPE,GROUP=SCOPE); see tether config --print',
          note: OIDC_SCOPES_NOTE,
        }),
    })
    .strict()
    .prefault({}),
  browserSignIn: z
    .object({
      idleTimeoutMs: positiveInt(BROWSER_SESSION_DEFAULTS.idleMs, '').meta({
        help: "a browser's sign-in (the cookie every tab shares) that bought no WebSocket ticket for this long ends",
        flag: 'browser-idle-timeout-ms',
      }),
      lifetimeMs: positiveInt(BROWSER_SESSION_DEFAULTS.absoluteMs, '').meta({
        help: "a browser's sign-in ends this long after it began, its connections too",
        flag: 'browser-lifetime-ms',
      }),
    })
    .strict()
    .prefault({}),
};

/** Checks the OIDC keys go together. */
export function checkOidc(
  c: {
    auth: 'on' | 'off';
    oidc: { issuer?: string; clientId?: string; clientSecretFile?: string; clientSecret?: string; scopes: Record<string, string[]> };
  },
  ctx: FinishContext,
): void {
  const o = c.oidc;
  if ((o.issuer === undefined) !== (o.clientId === undefined))
    ctx.problem(
      o.issuer ? 'oidc.clientId' : 'oidc.issuer',
      'sign-in with an identity provider needs both --oidc-issuer and --oidc-client-id',
    );
  if (o.clientSecretFile && o.clientSecret)
    ctx.problem('oidc.clientSecret', 'give --oidc-client-secret-file or TETHER_OIDC_CLIENT_SECRET, not both');
  if (o.issuer && c.auth === 'off') ctx.problem('oidc.issuer', 'sign-in with an identity provider needs authentication on (--auth on)');
  if (o.issuer && Object.keys(o.scopes).length === 0)
    ctx.problem(
      'oidc.scopes',
      'nobody could use the gateway: map at least one group or claim value to scopes (or "*" for everyone) in the config file',
    );
}

/** TLS on both listeners (wss:// and grpcs://), and mutual TLS when a client CA is given. */
export const TLS_KEYS = {
  tlsCert: pemFile('serve TLS on both ports with this certificate chain (PEM): wss:// and grpcs://', 'tls-cert'),
  tlsKey: pemFile('private key (PEM) of --tls-cert', 'tls-key'),
  tlsClientCa: pemFile('mutual TLS: every connection must present a client certificate signed by this CA (PEM)', 'tls-client-ca'),
};

/** Checks the TLS keys go together. */
export function checkTls(c: { tlsCert?: string; tlsKey?: string; tlsClientCa?: string }, ctx: FinishContext): void {
  if ((c.tlsCert === undefined) !== (c.tlsKey === undefined))
    ctx.problem(c.tlsCert ? 'tlsKey' : 'tlsCert', 'TLS needs both a certificate and its key');
  if (c.tlsClientCa !== undefined && c.tlsCert === undefined) ctx.problem('tlsClientCa', 'mutual TLS needs TLS on (a certificate and key)');
}

/** The server TLS options of a configuration, read from its files. */
export function serverTlsOf(c: {
  tlsCert?: string;
  tlsKey?: string;
  tlsClientCa?: string;
}): { cert: Buffer; key: Buffer; clientCa?: Buffer } | undefined {
  if (!c.tlsCert || !c.tlsKey) return undefined;
  return { cert: readFileSync(c.tlsCert), key: readFileSync(c.tlsKey), clientCa: c.tlsClientCa ? readFileSync(c.tlsClientCa) : undefined };
}

/** The routing core's limits (threats.md part 3), each with the gateway's default. */
export const LIMIT_KEYS = {
  limits: z
    .object({
      maxFrameBytes: positiveInt(CHANNEL_DEFAULTS.maxFrameBytes, 'largest frame either way, WebSocket and gRPC'),
      helloTimeoutMs: positiveInt(GATEWAY_DEFAULTS.helloTimeoutMs, 'a connection must say hello within this time'),
      heartbeatIntervalMs: positiveInt(GATEWAY_DEFAULTS.heartbeat.intervalMs, 'how often the gateway pings each connection'),
      heartbeatTimeoutMs: positiveInt(GATEWAY_DEFAULTS.heartbeat.timeoutMs, 'a ping unanswered this long closes the connection'),
      slowClientBytes: positiveInt(
        GATEWAY_DEFAULTS.slowClientBytes,
        'a connection whose send queue (frames, replies and events alike) passes this is cut as a slow consumer (it may resume)',
      ),
      maxPendingPrompts: positiveInt(
        GATEWAY_DEFAULTS.maxPendingPrompts,
        'pending permission prompts per session before new ones are denied',
      ),
      promptExpiryMs: positiveInt(GATEWAY_DEFAULTS.promptExpiryMs, 'an unanswered permission prompt is denied after this'),
      controlAnswerMs: positiveInt(
        GATEWAY_DEFAULTS.controlAnswerMs,
        'a control request (e.g. interrupt) the engine leaves unanswered this long marks the session unresponsive',
      ),
      maxClientsPerSession: positiveInt(GATEWAY_DEFAULTS.maxMembers, 'clients attached to one session at once'),
      maxSessionsPerPrincipal: positiveInt(GATEWAY_DEFAULTS.maxSessionsPerPrincipal, 'live sessions one principal may own'),
      // Bounded by what one Node timer can wait (about 24.8 days): a longer one would fire at once.
      agentLostTimeoutMs: z
        .number()
        .int()
        .positive()
        .max(2 ** 31 - 1)
        .default(GATEWAY_DEFAULTS.agentLostTimeoutMs)
        .meta({
          help: 'a session whose agent is away (link lost, restarting, asleep) waits this long for it, prompts queued, then ends with the reason (default 24 h)',
          flag: 'agent-lost-timeout-ms',
        }),
      agentWaitMs: positiveInt(
        GATEWAY_DEFAULTS.agentWaitMs,
        'a create or stop for an agent whose link dropped waits this long for it to come back',
      ),
      endedRetentionMs: positiveInt(GATEWAY_DEFAULTS.endedRetentionMs, 'an ended session stays listed (history readable) this long'),
      replayMaxFrames: positiveInt(GATEWAY_DEFAULTS.replay.maxFrames, 'history frames kept per session'),
      replayMaxBytes: positiveInt(GATEWAY_DEFAULTS.replay.maxBytes, 'history bytes kept per session'),
      maxConnections: positiveInt(
        DOOR_DEFAULTS.maxConnections,
        'open TCP connections on the whole gateway (both ports); more are refused at once (HTTP 503)',
      ),
      maxConnectionsPerAddress: positiveInt(
        DOOR_DEFAULTS.maxConnectionsPerAddress,
        'open TCP connections from one remote address (raise it behind a proxy or NAT)',
      ),
      authFailuresPerMinute: positiveInt(
        DOOR_DEFAULTS.authFailuresPerMinute,
        'failed authentications one address may make per minute once its burst is spent (then HTTP 429 / RESOURCE_EXHAUSTED)',
      ),
      authFailureBurst: positiveInt(DOOR_DEFAULTS.authFailureBurst, 'failed authentications one address may make back to back'),
      headersTimeoutMs: positiveInt(
        DOOR_DEFAULTS.headersTimeoutMs,
        'an HTTP request or WebSocket upgrade must send its headers within this',
      ),
      requestTimeoutMs: positiveInt(DOOR_DEFAULTS.requestTimeoutMs, 'an HTTP request must be complete within this'),
    })
    .strict()
    .prefault({}),
};

/** The `tether gateway` schema. */
export const gatewaySchema = z
  .object({
    host: z
      .string()
      .min(1)
      .default(DEFAULT_GATEWAY_HOST)
      .meta({ help: 'address to listen on (0.0.0.0 or :: for every interface)', flag: 'host' }),
    ...LISTEN_KEYS,
    ...AUTH_KEYS,
    ...OIDC_KEYS,
    ...TLS_KEYS,
    ...loggingKeys('info'),
    ...LIMIT_KEYS,
    ...CLUSTER_KEYS,
    ...NOTIFY_KEYS,
  })
  .strict();

type ParsedGateway = z.infer<typeof gatewaySchema>;

/** A configuration with the gateway keys {@link resolveGatewayKeys} leaves open resolved. */
export type ResolvedGatewayKeys<C> = Omit<C, 'grpcPort' | 'stateDir' | 'auditLog'> & {
  /** null: no gRPC listener. */
  grpcPort: number | null;
  /** Absolute. */
  stateDir: string;
  auditLog: string;
};

/** The gateway's configuration after loading: every default resolved. */
export type GatewayConfig = ResolvedGatewayKeys<ParsedGateway>;

/** The part of a configuration {@link resolveGatewayKeys} completes (shared with `tether up`). */
type GatewayKeysIn = { port: number; grpcPort?: number | null; stateDir?: string; auditLog?: string; keyFile?: string };

/**
 * Resolves what the gateway keys leave open: the gRPC port (7801, or 0 beside port 0), the
 * state folder (absolute; default ~/.tether) and the audit file in it. `--key` together with
 * `--state-dir` on one command line is refused as before (the file or variables may set both:
 * the key file then signs and the state folder keeps sessions and the audit trail).
 */
export function resolveGatewayKeys<C extends GatewayKeysIn>(c: C, ctx: FinishContext): ResolvedGatewayKeys<C> {
  if (ctx.sourceOf('keyFile') === '--key' && ctx.sourceOf('stateDir') === '--state-dir')
    ctx.problem('keyFile', 'use --key or --state-dir, not both');
  const stateDir = resolve(c.stateDir ?? DEFAULT_STATE_DIR);
  return {
    ...c,
    grpcPort: c.grpcPort !== undefined ? c.grpcPort : c.port === 0 ? 0 : DEFAULT_GRPC_PORT,
    stateDir,
    auditLog: resolve(c.auditLog ?? join(stateDir, AUDIT_FILE)),
  };
}

/** `tether gateway`: flags, TETHER_* variables and a config file. */
export const GATEWAY_CONFIG: ConfigSpec<typeof gatewaySchema, GatewayConfig> = {
  program: 'gateway',
  schema: gatewaySchema,
  finish: (c, ctx) => {
    checkTls(c, ctx);
    checkOidc(c, ctx);
    checkClusterKeys(c, ctx);
    return resolveGatewayKeys(c, ctx);
  },
};

/** The routing core's limits from the `limits` keys. */
export function gatewayLimitsOf(l: ParsedGateway['limits']): GatewayLimits {
  return {
    ...GATEWAY_DEFAULTS,
    helloTimeoutMs: l.helloTimeoutMs,
    heartbeat: { intervalMs: l.heartbeatIntervalMs, timeoutMs: l.heartbeatTimeoutMs },
    slowClientBytes: l.slowClientBytes,
    maxPendingPrompts: l.maxPendingPrompts,
    promptExpiryMs: l.promptExpiryMs,
    controlAnswerMs: l.controlAnswerMs,
    maxMembers: l.maxClientsPerSession,
    maxSessionsPerPrincipal: l.maxSessionsPerPrincipal,
    agentLostTimeoutMs: l.agentLostTimeoutMs,
    agentWaitMs: l.agentWaitMs,
    endedRetentionMs: l.endedRetentionMs,
    replay: { maxFrames: l.replayMaxFrames, maxBytes: l.replayMaxBytes },
  };
}

/** The door's limits from the `limits` keys. */
export function doorLimitsOf(l: ParsedGateway['limits']): DoorLimits {
  return {
    maxConnections: l.maxConnections,
    maxConnectionsPerAddress: l.maxConnectionsPerAddress,
    authFailuresPerMinute: l.authFailuresPerMinute,
    authFailureBurst: l.authFailureBurst,
    headersTimeoutMs: l.headersTimeoutMs,
    requestTimeoutMs: l.requestTimeoutMs,
  };
}

/** scheme://host[:port] of http(s), nothing after it. */
function isOrigin(origin: string): boolean {
  try {
    const u = new URL(origin);
    return (
      (u.protocol === 'http:' || u.protocol === 'https:') && u.pathname.replace(/\/$/, '') === '' && !u.search && !u.hash && !u.username
    );
  } catch {
    return false;
  }
}
