import { homedir, hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { readTokenFile } from '../core/auth/token-file.js';
import { loggingKeys, positiveInt } from '../core/config/common.js';
import type { ConfigSpec, FinishContext } from '../core/config/load.js';
import { HEARTBEAT_DEFAULTS } from '../core/link/heartbeat.js';
import { DIAL_TLS_KEYS } from '../core/config/tls-keys.js';
import { AgentDescriptor } from '../core/protocol/methods.js';
import { EngineKind } from '../core/protocol/session-options.js';
import { AGENT_INITIALIZE_TIMEOUT_MS } from './agent.js';
import { DEFAULT_EOF_GRACE_MS, DEFAULT_TERM_GRACE_MS } from './engine-process.js';
import { resolveEngineUser, type EngineEnvPolicy } from './engine-env.js';
import { allowFlagProblem, type EngineFlagPolicy } from './extra-args.js';
import { allowControlProblem, type EngineControlAllowance } from '../core/engine-controls.js';

/** Where the agent keeps its host key unless hostKeyFile says otherwise. */
export const DEFAULT_HOST_KEY_FILE = join(homedir(), '.tether', 'agent-host-key.pem');

/** Which engines the agent runs and how it treats them (also the `tether up` agent's). */
export const ENGINE_KEYS = {
  engine: z
    .preprocess((v) => (typeof v === 'string' ? [v] : v), z.array(z.enum(['auto', ...EngineKind.options])).min(1))
    .default(['auto'])
    .meta({
      help: 'the engines sessions may choose, the first by default (repeatable): auto (claude if on PATH, else the built-in demo), claude, demo, acp (an ACP agent at --engine-command), or an ACP preset: opencode, gemini, codex, claude-acp',
      flag: 'engine',
    }),
  engineCommand: z.string().min(1).optional().meta({
    help: 'the Claude Code executable (default: claude on PATH); with --engine acp, the ACP agent\'s command line, e.g. "opencode acp"',
    flag: 'engine-command',
  }),
  cwd: z.string().min(1).optional().meta({ help: 'working folder for sessions that name none (default: the current folder)', flag: 'cwd' }),
  sessionRoots: z.array(z.string().min(1)).default([]).meta({
    help: 'sessions may work only in these folders and below (repeatable; default: anywhere). The folder decides which project settings and hooks the engine loads',
    flag: 'session-root',
  }),
  mentionRoots: z.array(z.string().min(1)).default([]).meta({
    help: "folders a prompt's @-mentions may name beyond the session's folder and the session roots (repeatable; / for anywhere). The engine reads a mentioned file into the prompt without a tool call",
    flag: 'mention-root',
  }),
  initializeTimeoutMs: positiveInt(AGENT_INITIALIZE_TIMEOUT_MS, "a new engine must answer the agent's initialize within this time"),
  engineEofGraceMs: positiveInt(DEFAULT_EOF_GRACE_MS, 'stopping an engine: wait this long after closing its stdin, then SIGTERM'),
  engineTermGraceMs: positiveInt(DEFAULT_TERM_GRACE_MS, 'stopping an engine: wait this long after SIGTERM, then SIGKILL'),
  drainMs: z.number().int().nonnegative().optional().meta({
    help: 'a graceful restart: on SIGTERM, running turns may finish for up to this long, then the engines stop and their sessions wait at the gateway for the next agent process, which resumes them (default: SIGTERM ends the sessions)',
    flag: 'drain-ms',
  }),
  allowEngineFlags: z
    .array(
      z
        .string()
        .transform((name) => (name.startsWith('-') ? name : `--${name}`))
        .superRefine((name, ctx) => {
          const problem = allowFlagProblem(name);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }),
    )
    .default([])
    .meta({
      help: 'an engine flag sessions may use although it runs programs, loads code or settings, or reaches files beyond the session folder, named with or without its dashes, e.g. mcp-config (repeatable)',
      flag: 'allow-engine-flag',
    }),
  allowEngineControls: z
    .array(
      z.string().superRefine((name, ctx) => {
        const problem = allowControlProblem(name);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
    )
    .default([])
    .meta({
      help: "an engine control request sessions' owners may send although it starts programs, loads code or settings, changes the engine's environment or writes settings files, e.g. mcp_set_servers (repeatable)",
      flag: 'allow-engine-control',
    }),
  allowBypassPermissions: z.boolean().default(false).meta({
    help: 'sessions may run tools without asking anyone (permission mode bypassPermissions, --dangerously-skip-permissions)',
    flag: 'allow-bypass-permissions',
  }),
  engineEnv: z
    .record(z.string().regex(/^[^=\0]+$/, 'a variable name'), z.string())
    .default({})
    .meta({ help: 'a variable every engine gets, over the inherited ones (flag repeatable KEY=VALUE)', flag: 'engine-env' }),
  engineEnvDeny: z.array(z.string().min(1)).default([]).meta({
    help: 'withhold variables whose name matches GLOB (* and ?) from every engine (repeatable); TETHER_* and the token are always withheld',
    flag: 'engine-env-deny',
  }),
  engineUser: z
    .string()
    .min(1)
    .optional()
    .superRefine((spec, ctx) => {
      if (spec === undefined) return;
      try {
        resolveEngineUser(spec);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    })
    .meta({
      help: 'run engines as this OS user (NAME or UID[:GID]); the agent must run as root or hold CAP_SETUID/CAP_SETGID',
      flag: 'engine-user',
    }),
};

/** The engine keys as loaded. */
type EngineKeys = z.infer<z.ZodObject<typeof ENGINE_KEYS>>;

/** The agent options that follow from the engine keys: flag policy, environment policy and session folders. */
export function enginePoliciesOf(
  c: Pick<
    EngineKeys,
    | 'allowEngineFlags'
    | 'allowEngineControls'
    | 'allowBypassPermissions'
    | 'engineEnv'
    | 'engineEnvDeny'
    | 'engineUser'
    | 'sessionRoots'
    | 'mentionRoots'
  >,
): {
  engineFlags: EngineFlagPolicy;
  engineControls: EngineControlAllowance;
  engineEnvPolicy: EngineEnvPolicy;
  sessionRoots: string[];
  mentionRoots: string[];
} {
  return {
    sessionRoots: c.sessionRoots.map((r) => resolve(r)),
    mentionRoots: c.mentionRoots.map((r) => resolve(r)),
    engineFlags: { allowFlags: c.allowEngineFlags, allowBypassPermissions: c.allowBypassPermissions },
    engineControls: { allowControls: c.allowEngineControls },
    engineEnvPolicy: {
      set: c.engineEnv,
      deny: c.engineEnvDeny,
      user: c.engineUser === undefined ? undefined : resolveEngineUser(c.engineUser),
    },
  };
}

/**
 * The agent's `gateway` key: one URL (a string, as always) or several (a list, or commas in
 * one string). Loaded as the string when it is one, else as the list.
 */
const gatewayKey = z
  .preprocess(
    (v) =>
      typeof v === 'string' || (Array.isArray(v) && v.every((u) => typeof u === 'string'))
        ? [v]
            .flat()
            .flatMap((u: string) => u.split(','))
            .map((u) => u.trim())
            .filter(Boolean)
        : v,
    z
      .array(z.string())
      .min(1)
      .superRefine((urls, ctx) => {
        for (const url of urls) {
          if (!/^(wss?|grpcs?):\/\/[^/]/.test(url) || !URL.canParse(url))
            ctx.addIssue({
              code: 'custom',
              message: `must be a ws://, wss://, grpc:// or grpcs:// URL, got ${JSON.stringify(url)}`,
              path: [],
            });
        }
      }),
  )
  .transform((urls): string | string[] => (urls.length === 1 ? urls[0] : urls));

/** The `tether agent` schema. */
export const agentSchema = z
  .object({
    gateway: gatewayKey.meta({
      help: 'the gateway to dial: ws://, wss://, grpc:// or grpcs:// HOST:PORT; several (repeatable, or comma-separated) are gateways of one cluster, tried in turn when the link drops',
      flag: 'gateway',
    }),
    name: AgentDescriptor.shape.name
      .optional()
      .meta({ help: "agent name clients use (default: this host's name)", flag: 'name', env: 'TETHER_AGENT' }),
    token: z.string().min(1).optional().meta({ help: 'agent token (tether token --role agent)', flag: 'token', secret: true }),
    tokenFile: z.string().min(1).optional().meta({
      help: 'read the agent token from this file instead (tether token --out writes one); re-read to renew the token on the live link and at every reconnect',
      flag: 'token-file',
    }),
    hostKeyFile: z.string().min(1).nullable().default(DEFAULT_HOST_KEY_FILE).meta({
      help: "the agent's host key (Ed25519, created 0600 on first run); the gateway pins it, so the token alone cannot register as this agent; off: none",
      flag: 'host-key-file',
    }),
    labels: z
      .record(z.string(), z.string())
      .default({})
      .meta({ help: 'labels shown in "tether agents" (flag repeatable KEY=VALUE; variable comma-separated)', flag: 'label' }),
    ...ENGINE_KEYS,
    ...DIAL_TLS_KEYS,
    heartbeatIntervalMs: positiveInt(HEARTBEAT_DEFAULTS.intervalMs, 'how often the agent pings the gateway'),
    heartbeatTimeoutMs: positiveInt(HEARTBEAT_DEFAULTS.timeoutMs, 'a ping unanswered this long drops the link (it reconnects)'),
    ...loggingKeys('info'),
  })
  .strict();

/** The agent's configuration after loading: name and token resolved. */
export type AgentConfig = Omit<z.infer<typeof agentSchema>, 'name'> & { name: string };

/** `tether agent`: flags, TETHER_* variables and a config file. */
export const AGENT_CONFIG: ConfigSpec<typeof agentSchema, AgentConfig> = {
  program: 'agent',
  schema: agentSchema,
  finish: (c, ctx) => ({ ...c, name: c.name ?? hostname(), token: tokenOf(c, ctx) }),
};

/** The token: given directly, or read (trimmed) from tokenFile; never both. */
function tokenOf(c: { token?: string; tokenFile?: string }, ctx: FinishContext): string | undefined {
  if (c.tokenFile === undefined) return c.token;
  if (c.token !== undefined) {
    ctx.problem('tokenFile', `use a token or a token file, not both (token is set by ${ctx.sourceOf('token')})`);
    return undefined;
  }
  try {
    return readTokenFile(c.tokenFile);
  } catch (err) {
    ctx.problem('tokenFile', (err as Error).message);
    return undefined;
  }
}
