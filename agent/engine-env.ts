/**
 * What each engine process inherits: the agent's environment minus Tether's own settings and
 * secrets, plus what the agent's owner adds, minus what the owner withholds; and, optionally,
 * another OS user to run as. An engine runs tools a model chose, so anything it can see, a
 * prompt can print (issue 13, finding 5).
 */
import { readFileSync } from 'node:fs';
import { TetherError } from '../core/errors.js';
import type { TraceContext } from '../core/protocol/trace-context.js';
import type { SdkEnv } from '../core/protocol/sdk-env.js';

/** Prefix of Tether's own variables (TETHER_TOKEN, TETHER_GATEWAY, …): never passed to an engine. */
export const TETHER_ENV_PREFIX = 'TETHER_';

/** The owner's choices about engine environments (agent config: engineEnv, engineEnvDeny). */
export interface EngineEnvPolicy {
  /** Variables every engine gets (`--engine-env KEY=VALUE`), over the inherited ones. */
  set?: Record<string, string>;
  /** Names withheld from every engine (`--engine-env-deny GLOB`; `*` any run, `?` one character). */
  deny?: readonly string[];
  /** Secret values (the agent's token): a variable whose value contains one is withheld. */
  secrets?: readonly (string | undefined)[];
  /** The OS user engines run as (`--engine-user`): its HOME, USER and LOGNAME replace the agent's. */
  user?: EngineUser;
}

/**
 * The complete environment of one engine: `base` (the agent's own, by default) without its
 * TETHER_* variables, then the engine user's HOME, USER and LOGNAME, then `extra` (what the
 * agent itself sets for engines) and the owner's `set`; then without the owner's `deny` globs
 * and without any variable whose value carries a secret, whatever its source.
 */
export function engineEnvironment(
  extra: NodeJS.ProcessEnv,
  policy: EngineEnvPolicy = {},
  base: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const deny = (policy.deny ?? []).map(globToRegExp);
  const secrets = (policy.secrets ?? []).map((s) => s?.trim()).filter((s): s is string => !!s && s.length >= MIN_SECRET_CHARS);
  const inherited = Object.fromEntries(Object.entries(base).filter(([key]) => !key.toUpperCase().startsWith(TETHER_ENV_PREFIX)));
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries({ ...inherited, ...(policy.user && userEnv(policy.user)), ...extra, ...policy.set })) {
    if (value === undefined) continue;
    if (deny.some((re) => re.test(key))) continue;
    if (secrets.some((s) => value.includes(s))) continue;
    env[key] = value;
  }
  return env;
}

/**
 * The W3C trace context variables of an engine (TRACEPARENT, and TRACESTATE when there is one):
 * the agent's span that started it, so an engine that traces joins the session's trace. None
 * while tracing is off. Both are SDK switches (core/protocol/sdk-env.ts): a client's app that
 * gives its own (session option `env`) wins. The OTEL_* variables reach the engine as the rest
 * of the agent's environment does (withheld only by the owner's `engineEnvDeny`).
 */
export function traceEnv(trace: TraceContext | undefined): Pick<SdkEnv, 'TRACEPARENT' | 'TRACESTATE'> {
  if (!trace) return {};
  return { TRACEPARENT: trace.traceparent, ...(trace.tracestate ? { TRACESTATE: trace.tracestate } : {}) };
}

/** Shorter secrets are not matched (a one-letter "token" would withhold half the environment). */
const MIN_SECRET_CHARS = 16;

/** `*` any run of characters, `?` one; everything else literal; whole name. */
export function globToRegExp(glob: string): RegExp {
  const body = [...glob].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[\\^$.|+()[\]{}]/g, '\\$&'))).join('');
  return new RegExp(`^${body}$`);
}

/** An OS user engines run as (`--engine-user`), resolved once at agent start. */
export interface EngineUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/**
 * Resolves `--engine-user` (a name from /etc/passwd, or `UID[:GID]`) and checks the agent may
 * switch to it: only root (or the user itself) can. FAILED_PRECONDITION with a clear reason
 * otherwise, so the agent refuses to start rather than failing every session.
 */
export function resolveEngineUser(
  spec: string,
  passwd = readPasswd(),
  ownUid = process.getuid?.(),
  canSwitch = hasSetIdCapabilities(),
): EngineUser {
  const numeric = /^(\d+)(?::(\d+))?$/.exec(spec);
  const entry = passwd.find((u) => (numeric ? u.uid === Number(numeric[1]) : u.name === spec));
  let user: EngineUser;
  if (numeric)
    user = {
      name: entry?.name ?? spec,
      uid: Number(numeric[1]),
      gid: numeric[2] !== undefined ? Number(numeric[2]) : (entry?.gid ?? Number(numeric[1])),
      home: entry?.home ?? '/',
    };
  else if (entry) user = entry;
  else
    throw new TetherError(
      'FAILED_PRECONDITION',
      `engine user "${spec}" is not in /etc/passwd (give UID[:GID] for a user only your directory service knows)`,
    );
  if (ownUid === undefined) throw new TetherError('FAILED_PRECONDITION', '--engine-user needs a POSIX system');
  if (ownUid !== 0 && ownUid !== user.uid && !canSwitch) {
    throw new TetherError(
      'FAILED_PRECONDITION',
      `cannot run engines as "${user.name}" (uid ${user.uid}): the agent runs as uid ${ownUid} without CAP_SETUID and CAP_SETGID and may not switch users; run the agent as root (or grant it those capabilities), or drop --engine-user`,
    );
  }
  return user;
}

/** The variables that name the engine's user: HOME, USER, LOGNAME of the user it runs as. */
export function userEnv(user: EngineUser): Record<string, string> {
  return { HOME: user.home, USER: user.name, LOGNAME: user.name };
}

/** Whether this process holds CAP_SETUID and CAP_SETGID (Linux: bits 7 and 6 of CapEff). */
function hasSetIdCapabilities(): boolean {
  try {
    const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return eff !== undefined && (BigInt(`0x${eff}`) & 0xc0n) === 0xc0n;
  } catch {
    return false;
  }
}

function readPasswd(): EngineUser[] {
  let text = '';
  try {
    text = readFileSync('/etc/passwd', 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .map((line) => line.split(':'))
    .filter((p) => p.length >= 7 && /^\d+$/.test(p[2]) && /^\d+$/.test(p[3]))
    .map((p) => ({ name: p[0], uid: Number(p[2]), gid: Number(p[3]), home: p[5] || '/' }));
}
