/**
 * Side-by-side runs of one Agent SDK program: locally (the SDK spawns the real CLI), through
 * `tether-claude` (pathToClaudeCodeExecutable, gateway over WebSocket) and through
 * `remoteSpawn` (spawnClaudeCodeProcess, gateway over gRPC). Each route has its own scripted
 * Messages API (same script) and, for the remote ones, its own gateway + agent, so the three
 * run at the same time. What is compared (diff):
 *  - what the Messages API received per model call: system prompt, tool names and tool
 *    descriptions (the Agent tool's lists the subagents), model;
 *  - the message stream the app saw: every message, every field, except ids, uuids, session
 *    ids, timestamps and durations; the working folder and HOME of each route are replaced by
 *    placeholders;
 *  - the result, and what the program noted (hook calls, control answers, files on disk).
 */
import {
  query,
  type Options,
  type PermissionResult,
  type Query,
  type SDKMessage,
  type SDKUserMessage,
} from '@anthropic-ai/claude-agent-sdk';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEFAULT_EOF_GRACE_MS, DEFAULT_TERM_GRACE_MS } from '../../agent/engine-process.js';
import { remoteSpawn } from '../../client/remote-spawn.js';
import { claudeBinaryPath, claudeTestEnv, makeTempDir, type TempDir } from './claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeScenario } from './fake-anthropic.js';
import { startStack, withTimeout, type Stack } from './stack.js';

export const TETHER_CLAUDE = fileURLToPath(new URL('../../dist/bin/tether-claude.js', import.meta.url));

export type Route = 'local' | 'tether-claude' | 'remoteSpawn';
export const REMOTE_ROUTES: Route[] = ['tether-claude', 'remoteSpawn'];

/** What a program's callbacks get. */
export interface RunContext {
  route: Route;
  /** The session's working folder (on the agent's machine for the remote routes; same machine here). */
  cwd: string;
  fake: FakeAnthropic;
  /** Program-specific observations, compared like the rest. */
  notes: Record<string, unknown>;
  abort: AbortController;
  /** The uuid each user turn was sent with (for rewindFiles). */
  userUuids: string[];
  /** Streaming model calls of this run so far (the lane's fake serves every program). */
  modelCalls(): number;
}

/** One SDK program, run the same way on every route. */
export interface SdkProgram {
  name: string;
  scenario: (cwd: string) => FakeScenario;
  options?: (ctx: RunContext) => Partial<Options>;
  /** User turns, each sent once the previous turn's result arrived (streaming input). */
  turns: string[];
  /** Runs after the i-th result, before the next turn (or before input ends). */
  afterResult?: (i: number, q: Query, ctx: RunContext) => Promise<void>;
  /** Runs alongside the conversation from the start (interrupt, abort). */
  during?: (q: Query, ctx: RunContext) => Promise<void>;
  /** Masks what legitimately varies with timing, on the normalized observation. */
  mask?: (o: Observation) => Observation;
  /** Answers permission prompts (default: allow). */
  canUseTool?: (tool: string, input: Record<string, unknown>, ctx: RunContext) => Promise<PermissionResult>;
  timeoutMs?: number;
}

export interface ApiCall {
  model?: string;
  system: string;
  tools: string[];
  toolDescriptions: Record<string, string>;
}

export interface Observation {
  api: ApiCall[];
  stream: unknown[];
  result: unknown;
  notes: Record<string, unknown>;
  /** The iterator's error, if it threw (name and message). */
  error?: string;
}

export interface RunOutcome {
  route: Route;
  observation: Observation;
  /** From abort() to the end of the SDK's iterator, when the program aborted. */
  abortToEndMs?: number;
  stderr: string;
}

/** One route's lane: its fake model and, for remote routes, its gateway + agent. */
interface Lane {
  route: Route;
  fake: FakeAnthropic;
  stack?: Stack;
  home: TempDir;
}

export interface Bench {
  run(program: SdkProgram): Promise<Record<Route, RunOutcome>>;
  stop(): Promise<void>;
  /** The remote stacks, for tests that need the gateway directly. */
  stacks: Record<'tether-claude' | 'remoteSpawn', Stack>;
  /** The environment of the local CLI (and the agents' engines), without the SDK's additions. */
  localEnv(): Record<string, string>;
}

/** Keys whose values differ on every run: ids, uuids, timestamps, timings, process ids. */
const FREE_KEYS = /(^|_)(uuids?|id|session_id|timestamp|pid)$|_ms$|^messaging_socket_path$/;
const FAKE_ID = /^(msg|toolu|req)_fake_\d+$/;

/** Starts the three lanes. */
export async function startBench(): Promise<Bench> {
  const lanes: Lane[] = [];
  const dirs: TempDir[] = [];
  try {
    for (const route of ['local', 'tether-claude', 'remoteSpawn'] as Route[]) {
      const fake = await startFakeAnthropic({ responses: [] });
      const home = makeTempDir(`tether-sbs-home-${route}-`);
      dirs.push(home);
      const lane: Lane = { route, fake, home };
      lanes.push(lane);
      if (route !== 'local') {
        lane.stack = await startStack({
          engine: 'claude',
          engineCommand: claudeBinaryPath(),
          engineEnv: claudeTestEnv({ home: home.path, baseUrl: fake.url }),
          clientTransport: route === 'remoteSpawn' ? 'grpc' : 'ws',
          // The agent's production stop graces (test stacks shorten them), so a stop that
          // waits on them shows as it would in a deployment.
          agentOptions: { eofGraceMs: DEFAULT_EOF_GRACE_MS, termGraceMs: DEFAULT_TERM_GRACE_MS },
        });
      }
    }
  } catch (err) {
    await Promise.allSettled(lanes.map(async (l) => (await l.stack?.stop(), await l.fake.close())));
    for (const d of dirs) d.cleanup();
    throw err;
  }
  const lane = (r: Route) => lanes.find((l) => l.route === r)!;
  return {
    stacks: { 'tether-claude': lane('tether-claude').stack!, remoteSpawn: lane('remoteSpawn').stack! },
    localEnv: () => claudeTestEnv({ home: lane('local').home.path, baseUrl: lane('local').fake.url }),
    async run(program) {
      const outcomes = await Promise.all(lanes.map((l) => runOne(l, program)));
      return Object.fromEntries(outcomes.map((o) => [o.route, o])) as Record<Route, RunOutcome>;
    },
    async stop() {
      await Promise.allSettled(lanes.map(async (l) => (await l.stack?.stop(), await l.fake.close())));
      for (const d of dirs) d.cleanup();
    },
  };
}

function routeOptions(lane: Lane, cwd: string, stderr: (t: string) => void): Options {
  const { route, stack } = lane;
  if (route === 'local') {
    return {
      pathToClaudeCodeExecutable: claudeBinaryPath(),
      cwd,
      env: claudeTestEnv({ home: lane.home.path, baseUrl: lane.fake.url }),
      stderr,
    };
  }
  if (route === 'tether-claude') {
    const env = {
      PATH: process.env.PATH,
      TETHER_GATEWAY: stack!.url,
      TETHER_AGENT: 'test-agent',
      TETHER_CWD: cwd,
      TETHER_TOKEN: stack!.token ?? '',
    };
    return { pathToClaudeCodeExecutable: TETHER_CLAUDE, env, stderr };
  }
  return { spawnClaudeCodeProcess: remoteSpawn({ gateway: stack!.url, token: stack!.token, agent: 'test-agent', cwd, stderr }) };
}

async function runOne(lane: Lane, program: SdkProgram): Promise<RunOutcome> {
  const dir = makeTempDir('tether-sbs-cwd-'); // same length on every route: the CLI derives folder names from it
  lane.fake.setScenario(program.scenario(dir.path));
  const firstCall = lane.fake.requests.length;
  const callsBefore = lane.fake.modelRequests().length;
  const ctx: RunContext = {
    route: lane.route,
    cwd: dir.path,
    fake: lane.fake,
    notes: {},
    abort: new AbortController(),
    userUuids: [],
    modelCalls: () => lane.fake.modelRequests().length - callsBefore,
  };
  let stderr = '';
  const messages: SDKMessage[] = [];
  let error: string | undefined;
  let abortedAt: number | undefined;
  let endedAt: number | undefined;
  ctx.abort.signal.addEventListener('abort', () => (abortedAt = Date.now()));
  try {
    let results = 0;
    let wake: (() => void) | undefined;
    let q: Query | undefined;
    const afterResults: Promise<void>[] = [];
    async function* prompts(): AsyncGenerator<SDKUserMessage> {
      for (const [i, text] of program.turns.entries()) {
        const uuid = randomUUID();
        ctx.userUuids.push(uuid);
        yield { type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '', uuid } as SDKUserMessage;
        while (results <= i && !ctx.abort.signal.aborted) await new Promise<void>((resolve) => (wake = resolve));
        await afterResults[i];
      }
    }
    const canUseTool = (tool: string, input: Record<string, unknown>): Promise<PermissionResult> =>
      program.canUseTool ? program.canUseTool(tool, input, ctx) : Promise.resolve({ behavior: 'allow', updatedInput: input });
    q = query({
      prompt: prompts(),
      options: {
        ...routeOptions(lane, dir.path, (t) => void (stderr += t)),
        canUseTool,
        ...program.options?.(ctx),
        abortController: ctx.abort,
      },
    });
    const during = program.during?.(q, ctx).catch((err: Error) => void (ctx.notes.duringError = err.message));
    const drive = async () => {
      try {
        for await (const m of q!) {
          messages.push(m);
          if (m.type === 'result') {
            afterResults[results] =
              program.afterResult?.(results, q!, ctx).catch((err: Error) => void (ctx.notes[`afterResult${results}Error`] = err.message)) ??
              Promise.resolve();
            results++;
            wake?.();
          }
        }
      } catch (err) {
        error = `${(err as Error).name}: ${(err as Error).message.split('\n')[0]}`;
      } finally {
        endedAt = Date.now();
        wake?.();
      }
    };
    try {
      await withTimeout(drive(), program.timeoutMs ?? 30_000, `${program.name} via ${lane.route}`);
      await during;
    } finally {
      q.close();
    }
  } finally {
    ctx.notes.filesLeft = listFiles(dir.path);
    dir.cleanup();
  }
  const paths: [string, string][] = [
    [dir.path, '<cwd>'],
    [dir.path.replace(/[^A-Za-z0-9]/g, '-'), '<cwd-slug>'],
    [lane.home.path, '<home>'],
    [lane.fake.url, '<fake>'],
  ];
  const api = lane.fake.requests.slice(firstCall).filter((r) => r.stream && r.answeredWith !== 'aux');
  let observation: Observation = normalize(
    {
      api: api.map((r) => ({ model: r.model, system: r.system, tools: r.toolNames, toolDescriptions: r.toolDescriptions })),
      stream: messages,
      result: messages.filter((m) => m.type === 'result').at(-1) ?? null,
      notes: ctx.notes,
      ...(error ? { error } : {}),
    },
    paths,
  ) as Observation;
  if (program.mask) observation = program.mask(observation);
  return { route: lane.route, observation, abortToEndMs: abortedAt && endedAt ? endedAt - abortedAt : undefined, stderr };
}

function listFiles(dir: string): string[] {
  // Only what the programs create at the top level; enough to see a write or a rewind.
  return ['cp.txt', 'plan.txt', 'made.txt'].filter((f) => existsSync(`${dir}/${f}`));
}

/** Ids, timestamps and durations out; route-specific paths replaced; fake ids masked. */
export function normalize(value: unknown, paths: [string, string][]): unknown {
  if (typeof value === 'string') {
    let s = value;
    for (const [from, to] of paths) s = s.split(from).join(to);
    return FAKE_ID.test(s) ? '<id>' : s;
  }
  if (Array.isArray(value)) return value.map((v) => normalize(v, paths));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (FREE_KEYS.test(k)) continue;
      out[normalize(k, paths) as string] = normalize(v, paths);
    }
    return out;
  }
  return value;
}

/** `value` without the keys `re` matches, at any depth (for what varies with timing). */
export function dropKeys<T>(value: T, re: RegExp): T {
  if (Array.isArray(value)) return value.map((v) => dropKeys(v, re)) as T;
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => !re.test(k))
        .map(([k, v]) => [k, dropKeys(v, re)]),
    ) as T;
  }
  return value;
}

/** The (type/subtype) sequence of a normalized stream. */
export function shapeOf(stream: unknown[]): string[] {
  return stream.map((m) => {
    const r = m as { type?: string; subtype?: string };
    return r.subtype ? `${r.type}/${r.subtype}` : String(r.type);
  });
}

/**
 * Where `b` differs from `a`, one line per difference (at most `max`): a stream whose shape
 * differs is reported once as the two shapes; other differences as JSON paths with both
 * values abbreviated.
 */
export function diffObservations(a: Observation, b: Observation, max = 12): string[] {
  const out: string[] = [];
  const sa = shapeOf(a.stream);
  const sb = shapeOf(b.stream);
  if (sa.join() !== sb.join()) out.push(`stream shape: [${sa.join(', ')}] vs [${sb.join(', ')}]`);
  const walk = (x: unknown, y: unknown, path: string): void => {
    if (out.length >= max) return;
    if (x === y) return;
    if (typeof x === 'object' && typeof y === 'object' && x !== null && y !== null && Array.isArray(x) === Array.isArray(y)) {
      if (Array.isArray(x) && path.startsWith('stream') && sa.join() !== sb.join()) return; // reported as the shape
      const keys = new Set([...Object.keys(x), ...Object.keys(y as object)]);
      for (const k of keys)
        walk((x as Record<string, unknown>)[k], (y as Record<string, unknown>)[k], Array.isArray(x) ? `${path}[${k}]` : `${path}.${k}`);
      return;
    }
    out.push(`${path}: ${brief(x)} vs ${brief(y)}`);
  };
  walk(a, b, '');
  return out.map((l) => l.replace(/^\./, ''));
}

function brief(v: unknown): string {
  if (v === undefined) return '(absent)';
  const s = JSON.stringify(v);
  if (typeof v === 'string' && v.length > 60) return `${v.length} chars ${JSON.stringify(v.slice(0, 40))}…`;
  return s.length > 80 ? `${s.slice(0, 77)}…` : s;
}
