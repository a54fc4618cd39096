import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModeArgs, STREAM_JSON_FLAGS } from '../agent/engine-command.js';
import { checkExtraArgs, type EngineFlagPolicy } from '../agent/extra-args.js';
import { AGENT_INIT_REQUEST_ID } from '../agent/session-relay.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { asTetherError } from '../core/errors.js';
import { engineUpdates } from '../gateway/session/turns/standing-rules.js';
import { startStack, TRANSPORT_PAIRS, withTimeout, type Stack, type TransportName } from './support/stack.js';

/** A recorded permission answer as the engine gets it through Tether: without its session allow rules. */
function withoutSessionAllows(f: Record<string, unknown>): Record<string, unknown> {
  const response = f.response as { response?: { updatedPermissions?: unknown } } | undefined;
  const updates = response?.response?.updatedPermissions;
  return Array.isArray(updates)
    ? { ...f, response: { ...response, response: { ...response!.response, updatedPermissions: engineUpdates(updates) } } }
    : f;
}

/**
 * Engine fidelity (issue 10). Every real CLI transcript in test/fixtures/engine is played
 * by the recorded engine (test/support/recorded-engine.mjs) behind a real gateway + agent; a
 * client sends the transcript's host frames through client → gateway → agent, each at the
 * point the transcript shows (after the engine frames that preceded it arrived). Checked per
 * transcript and transport pair:
 *  (a) the engine received exactly the transcript's host frames (JSON equal, key order aside),
 *      except what docs/protocol.md lists: user frames stamped with a uuid and an origin when
 *      they had none, an answer's session allow rules kept at the gateway, and the request_id
 *      rewrites: the agent's own initialize
 *      (`tether_agent_init`) and `tether-N` for a client's control_request/cancel (added
 *      when the client sent none, 61, whose answer then comes back without one);
 *  (b) the client received every engine frame byte for byte as the engine wrote it, in order;
 *      control_responses to the client's own requests arrive as `session.reply` with the
 *      client's request_id restored (the line equals the transcript frame);
 *  (c) nothing else changed: all other items are gateway-origin (events, and withdrawals of
 *      prompts the engine raised), every `prompt` event carries the message that was sent,
 *      there is no engine_error;
 *  (d) the `exited` event carries the transcript's exit code (or session.create fails with
 *      the engine's stderr tail when the CLI refused to start).
 *
 * Special cases (nothing is skipped silently; each is asserted differently, see SPECIAL):
 *  - The agent always initializes the engine itself with `{"hooks":null}` and consumes the
 *    answer. When a transcript opens with exactly that frame, the agent's initialize plays it.
 *    Otherwise (hooks registered in the first initialize: 50–57; no initialize at all: 62, 63,
 *    70) the recorded engine first plays the initialize exchange of 01 as a PRELUDE (the
 *    agent's handshake), and the client sends the whole transcript, its initialize included
 *    (forwarded like any control request, as a re-initialize; 41 and 57 show the CLI accepts
 *    one).
 *  - Start-up refusals (64, 65, 82c, 83: the CLI never answered initialize and exited 1):
 *    session.create must fail with FAILED_PRECONDITION naming the exit code and carrying the
 *    recorded stderr tail; the engine received only the agent's initialize. 83's
 *    error_during_execution result frame is written before the exit and is NOT relayed (no
 *    session exists yet): only the stderr tail reaches the client.
 *  - Frames the gateway refuses or absorbs never reach the engine (the point of the checks):
 *    the suite asserts the refusal code instead and the recorded engine skips those frames and
 *    its recorded reaction to them (TETHER_RECORDED_SKIP): 60 (non-JSON line), 61 (unknown
 *    type, answer to a request nobody raised, control_request without subtype, user frame
 *    without content), 40 (a control subtype core/engine-controls.ts does not list), 62
 *    (JSON-RPC frames without `type`), 15 (late answer to a prompt the
 *    engine cancelled), 41 (keep_alive: accepted, not forwarded).
 *  - 60: the non-JSON line that killed the CLI in the capture never reaches the engine, so
 *    the replay stops there (TETHER_RECORDED_UNTIL); the engine stays alive and exits 0 at
 *    the client's stop instead of the recorded 1.
 *  - EOF (every transcript's "host closed stdin" note, incl. 14, 70, 71, 72): the client calls
 *    session.stop, whose first stage closes the engine's stdin; frames the CLI writes after
 *    the EOF (14: the failed prompt and the rest of the turn; 72: the rest of the reply) must
 *    still reach the client, and the exit code must be the recorded one.
 *  - 73 (SIGTERM mid-turn): session.stop is the stop path: stdin EOF, then SIGTERM after the
 *    agent's grace (the capture sent SIGTERM first; the recorded engine takes the two host
 *    actions in either order); exit status 143 must come through.
 *  - 74 (SIGINT mid-turn): Tether has no SIGINT path (stop is EOF → SIGTERM → SIGKILL; a client
 *    interrupts with control_request interrupt, as in 30). The test sends the SIGINT to the
 *    engine process itself, as a Ctrl-C on the agent's machine would, and checks the frames
 *    the CLI writes after it reach the client unchanged; then session.stop for the EOF.
 *  - 82a–82c shared one HOME in the capture: they run in order against one HOME here too (the
 *    recorded engine keeps no state, so 82b/82c replay their own runs).
 *  - Flags: the client asks for each transcript's extra flags through session options
 *    (`extra_args`), and the recorded engine's argv must be the agent's canonical flags plus
 *    those, each value glued to its flag (`--flag=value`). Exceptions: 18 (captured without --permission-prompt-tool, which Tether always
 *    passes), 64 (without --verbose, idem) and 56 (`--settings` is not on the agent's allow
 *    list: asserted refused, then left out).
 */

const HERE = dirname(fileURLToPath(import.meta.url));
const FIXTURES = resolve(process.env.TETHER_ENGINE_FIXTURES ?? join(HERE, 'fixtures', 'engine'));
const RECORDED_ENGINE = join(HERE, 'support', 'recorded-engine.mjs');
/**
 * What the replay's agent owner allows beyond the safe flags: 41 starts an MCP server
 * command and 65 asks for bypassPermissions (both refused by a default agent, as
 * test/engine-flags.test.ts checks). Values reach the engine as `--flag=value`.
 */
const REPLAY_FLAG_POLICY: EngineFlagPolicy = { allowFlags: ['--mcp-config'], allowBypassPermissions: true };

/** The transcript whose initialize exchange stands for the agent's own handshake. */
const PRELUDE = '01_basic_text_turn';
const AGENT_INIT = { type: 'control_request', request_id: AGENT_INIT_REQUEST_ID, request: { subtype: 'initialize', hooks: null } };
const EOF_NOTE = 'host closed stdin (EOF)';
const SIGTERM_NOTE = 'host sent SIGTERM';
const SIGINT_NOTE = 'host sent SIGINT';
const GATEWAY_EVENT_SUBTYPES = new Set([
  'state',
  'presence',
  'prompt',
  'prompt_decided',
  'prompt_turn',
  'turn',
  'exited',
  'interrupt',
  'queued',
  // After each result: what the turn used, as the usage ledger booked it (issue 35).
  'usage',
]);

/** Every client transport × agent transport (a replay costs well under a second). */
const PAIRS: { client: TransportName; agent: TransportName }[] = TRANSPORT_PAIRS;

// ---- transcripts ---------------------------------------------------------------------------

type Frame = Record<string, unknown>;

interface Entry {
  /** Line index in the .ndjson file (0-based). */
  index: number;
  dir: 'in' | 'out' | 'note' | 'exit';
  frame?: Frame;
  raw?: string;
  note?: string;
  code?: number | null;
  signal?: string | null;
}

interface IndexEntry {
  file: string;
  description: string;
  argv: string[];
  env_added: Record<string, string>;
  exit_code: number;
}

interface Transcript {
  name: string;
  path: string;
  entries: Entry[];
  index: IndexEntry;
  meta: { stderr_tail?: string };
}

function readEntries(path: string): Entry[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, index) => ({ ...(JSON.parse(l) as Omit<Entry, 'index'>), index }));
}

const INDEX = JSON.parse(readFileSync(join(FIXTURES, 'index.json'), 'utf8')) as IndexEntry[];
const TRANSCRIPTS = new Map<string, Transcript>(
  INDEX.map((ix) => {
    const name = ix.file.replace(/\.ndjson$/, '');
    const path = join(FIXTURES, ix.file);
    const metaPath = join(FIXTURES, `${name}.meta.json`);
    const meta = existsSync(metaPath) ? (JSON.parse(readFileSync(metaPath, 'utf8')) as Transcript['meta']) : {};
    return [name, { name, path, entries: readEntries(path), index: ix, meta }];
  }),
);

// ---- special cases ---------------------------------------------------------------------------

/** What the gateway does with an `in` line it does not deliver to the engine. */
type Refusal = { code: string; why: string } | { absorbed: true; why: string };

interface Special {
  why: string;
  /** By transcript line index. */
  refused?: Record<number, Refusal>;
  /** Replay stops before this line index (the rest cannot happen behind the gateway). */
  until?: number;
  /** Exit code expected behind the gateway when it differs from the recording. */
  exitCode?: number;
  /** The SIGINT note is delivered by the test itself (Tether has no SIGINT path). */
  sigintFromTest?: true;
  /** Recorded flags that cannot be asked for through Tether, and why. */
  argvDiffers?: string;
}

const SPECIAL: Record<string, Special> = {
  '14_permission_unanswered_then_eof': {
    why: 'prompt never answered; session.stop closes stdin; the failed prompt and the rest of the turn arrive after the EOF',
  },
  '15_permission_pending_then_interrupt': {
    why: 'interrupt while a prompt is pending; the engine cancels the prompt, so the late answer is refused by the gateway',
    refused: { 13: { code: 'FAILED_PRECONDITION', why: 'answer to a prompt the engine already cancelled (already decided)' } },
  },
  '18_no_permission_prompt_tool': {
    why: 'replayed as captured',
    argvDiffers: 'captured without --permission-prompt-tool stdio, which the agent always passes',
  },
  '40_control_requests': {
    why: 'a control subtype the gateway does not know, and a permission mode that is none, are refused before the engine (issue 27), not passed through for the CLI to answer',
    refused: {
      11: { code: 'INVALID_ARGUMENT', why: 'set_permission_mode "bogus": not a permission mode (core/policy/policy.ts checkMode)' },
      20: { code: 'INVALID_ARGUMENT', why: 'control subtype not in core/engine-controls.ts (no_such_subtype)' },
    },
  },
  '41_mcp_failed_server_and_reinitialize': {
    why: 'keep_alive is accepted and not forwarded',
    refused: { 4: { absorbed: true, why: 'keep_alive: accepted, not forwarded (docs/protocol.md)' } },
  },
  '56_hook_events_settings_command_hook': {
    why: 'replayed as captured',
    argvDiffers: '--settings is not on the agent allow list (asserted refused)',
  },
  '60_invalid_json_is_fatal': {
    why: 'the non-JSON line cannot be sent through the gateway; the engine survives it, so the replay ends there and the engine exits 0 at the stop',
    refused: { 2: { code: 'INVALID_ARGUMENT', why: 'a non-JSON engine line is refused by session.send params validation' } },
    until: 2,
    exitCode: 0,
  },
  '61_unknown_and_malformed_frames': {
    why: 'malformed frames are refused before the engine; the request without request_id gets one (tether-N) and its answer comes back without one',
    refused: {
      2: { code: 'INVALID_ARGUMENT', why: 'unknown frame type' },
      3: { code: 'NOT_FOUND', why: 'control_response for a request nobody raised' },
      4: { code: 'INVALID_ARGUMENT', why: 'control_request without subtype (the CLI would answer an error)' },
      8: { code: 'INVALID_ARGUMENT', why: 'user frame without message.content (the CLI would start an empty turn)' },
    },
  },
  '62_jsonrpc_dialect_ignored': {
    why: 'JSON-RPC styled frames have no type: refused by the gateway',
    refused: {
      0: { code: 'INVALID_ARGUMENT', why: 'frame without type (JSON-RPC initialize)' },
      1: { code: 'INVALID_ARGUMENT', why: 'frame without type (JSON-RPC user_message)' },
    },
  },
  '64_stream_json_without_verbose': { why: 'start-up refusal', argvDiffers: 'captured without --verbose, which the agent always passes' },
  '65_bypass_permissions_as_root': { why: 'start-up refusal (--permission-mode bypassPermissions asked for through extra_args)' },
  '70_eof_before_any_input': { why: 'no frame at all: session.stop right after create' },
  '71_eof_after_initialize': { why: 'only the (agent) initialize, then session.stop' },
  '72_eof_mid_turn': { why: 'session.stop mid-turn: the rest of the turn arrives after the EOF' },
  '73_sigterm_mid_turn': { why: 'session.stop = EOF, then SIGTERM after the grace; exit status 143' },
  '74_sigint_mid_turn': {
    why: 'SIGINT sent by the test (no SIGINT path in Tether); frames after it relayed; then session.stop',
    sigintFromTest: true,
  },
  '82c_session_id_in_use': { why: 'start-up refusal, after 82a and 82b in the same HOME' },
  '83_resume_unknown_session': { why: 'start-up refusal; the result frame written before the exit is not relayed (no session yet)' },
};

/** Transcripts whose CLI never answered initialize (asserted to be exactly these). */
const STARTUP_REFUSALS = [
  '64_stream_json_without_verbose',
  '65_bypass_permissions_as_root',
  '82c_session_id_in_use',
  '83_resume_unknown_session',
];
/** Transcripts that need the prelude (first host frame is not the agent's initialize). */
const NEED_PRELUDE = [
  '50_hook_pretooluse_deny_autoapproved',
  '51_hook_pretooluse_allow_skips_prompt',
  '52_hook_pretooluse_ask_forces_prompt',
  '53_hook_error_onfailure_block',
  '54_hook_error_default_continue',
  '55_hook_legacy_decision_block',
  '56_hook_events_settings_command_hook',
  '57_reinitialize_replaces_hooks',
  '62_jsonrpc_dialect_ignored',
  '63_no_initialize',
  '70_eof_before_any_input',
];

/** Groups replayed in order within one test (82a–82c share HOME). */
const GROUPS: { name: string; transcripts: string[] }[] = (() => {
  const out: { name: string; transcripts: string[] }[] = [];
  for (const name of TRANSCRIPTS.keys()) {
    if (/^82[abc]_/.test(name)) continue;
    out.push({ name, transcripts: [name] });
  }
  out.push({ name: '82a–82c (shared HOME)', transcripts: [...TRANSCRIPTS.keys()].filter((n) => /^82[abc]_/.test(n)).sort() });
  return out;
})();

// ---- plan ---------------------------------------------------------------------------------

const isInitialize = (f: Frame | undefined) => f?.type === 'control_request' && (f.request as Frame | undefined)?.subtype === 'initialize';
const responseOf = (f: Frame) => f.response as Frame | undefined;

interface Plan {
  t: Transcript;
  special: Special;
  /** The agent's initialize plays the transcript's first frame (else: prelude). */
  agentInit: boolean;
  startupRefusal: boolean;
  /** Entries of the replay (prelude first), cut at `until`. */
  entries: (Entry & { prelude?: true })[];
  /** Line indices of out entries that react to a refused in (never written). */
  reactions: Set<number>;
  /** Line index of the answer the agent consumes (its own initialize's). */
  consumed: number | undefined;
  exitCode: number;
  extraArgs: string[];
}

function planFor(t: Transcript): Plan {
  const special = SPECIAL[t.name] ?? { why: '' };
  const firstIn = t.entries.find((e) => e.dir === 'in');
  const agentInit =
    !!firstIn?.frame &&
    isInitialize(firstIn.frame) &&
    (firstIn.frame.request as Frame).hooks === null &&
    Object.keys(firstIn.frame.request as Frame).length === 2;
  const initAnswered =
    firstIn?.frame && isInitialize(firstIn.frame)
      ? t.entries.some(
          (e) => e.dir === 'out' && e.frame?.type === 'control_response' && responseOf(e.frame)?.request_id === firstIn.frame!.request_id,
        )
      : true;
  // Cut at `until`, keeping the refused frame there (its refusal is asserted, then the stop).
  let entries: Plan['entries'] = t.entries.filter(
    (e) => special.until === undefined || e.index < special.until || (e.index === special.until && special.refused?.[e.index]),
  );
  let consumed: number | undefined;
  if (agentInit) {
    consumed = t.entries.find(
      (e) => e.dir === 'out' && e.frame?.type === 'control_response' && responseOf(e.frame)?.request_id === firstIn!.frame!.request_id,
    )?.index;
  } else {
    const pre = readEntries(join(FIXTURES, `${PRELUDE}.ndjson`));
    const init = pre.find((e) => e.dir === 'in')!;
    const answer = pre.find((e) => e.dir === 'out' && responseOf(e.frame!)?.request_id === init.frame!.request_id)!;
    entries = [{ ...init, index: -2, prelude: true }, { ...answer, index: -1, prelude: true }, ...entries];
    consumed = -1;
  }
  const reactions = new Set<number>();
  let reacting = false;
  for (const e of entries) {
    if (e.dir === 'in') reacting = special.refused?.[e.index] !== undefined;
    else if (e.dir === 'out') {
      if (reacting) reactions.add(e.index);
    } else reacting = false;
  }
  const exit = t.entries.find((e) => e.dir === 'exit');
  return {
    t,
    special,
    agentInit,
    startupRefusal: !initAnswered,
    entries,
    reactions,
    consumed,
    exitCode: special.exitCode ?? exit?.code ?? 0,
    extraArgs: extraArgsFor(t.index.argv),
  };
}

/** The transcript's flags beyond the canonical ones, as a client asks for them (extra_args). */
function extraArgsFor(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-p' || a === '--verbose') continue;
    if (a === '--input-format' || a === '--output-format' || a === '--permission-prompt-tool' || a === '--settings') {
      i++;
      continue;
    }
    out.push(a);
  }
  return out;
}

// ---- comparison helpers ---------------------------------------------------------------------

/** Canonical JSON: sorted keys, so "key order aside" comparisons are string compares. */
function canon(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canon((v as Frame)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

function short(s: string, n = 300): string {
  return s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s;
}

function describeItem(i: SessionItem): string {
  if (i.kind === 'event') return `event:${i.event.subtype}`;
  const m = i.message;
  const sub = (m.subtype ?? (m.request as Frame | undefined)?.subtype ?? (m.response as Frame | undefined)?.subtype) as string | undefined;
  return `${i.kind}${i.kind === 'engine' ? `(${i.origin})` : ''}:${String(m.type)}${sub ? `/${sub}` : ''}`;
}

const isVisible = (i: SessionItem) => i.kind === 'reply' || (i.kind === 'engine' && i.origin === 'engine');

/** Reads a session in the background; waits are bounded. */
class Collector {
  readonly items: SessionItem[] = [];
  ended = false;
  error: unknown;
  private readonly listeners = new Set<() => void>();
  readonly done: Promise<void>;

  constructor(session: RemoteSession) {
    this.done = (async () => {
      try {
        for await (const item of session) {
          this.items.push(item);
          this.notify();
        }
      } catch (err) {
        this.error = err;
      } finally {
        this.ended = true;
        this.notify();
      }
    })();
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }

  visibleCount(): number {
    return this.items.filter(isVisible).length;
  }

  waitFor(cond: () => boolean, ms: number, what: string): Promise<void> {
    let check!: () => void;
    const p = new Promise<void>((resolve) => {
      check = () => {
        if (cond()) {
          this.listeners.delete(check);
          resolve();
        }
      };
      this.listeners.add(check);
      check();
    });
    return withTimeout(p, ms, `${what} (saw ${this.items.map(describeItem).join(', ') || 'nothing'})`).finally(() =>
      this.listeners.delete(check),
    );
  }

  /** Until `n` engine frames/replies arrived (or the stream ended: the comparison tells why). */
  waitVisible(n: number, ms = 10_000): Promise<void> {
    return this.waitFor(() => this.visibleCount() >= n || this.ended, ms, `${n} engine frames`);
  }
}

// ---- one replay ----------------------------------------------------------------------------

interface RunResult {
  compared: number;
  /** Of those: frames the engine received (the rest: what the client received, exits). */
  engineSide: number;
  differed: number;
  refusals: number;
  gatewayItems: number;
  diffs: string[];
}

const totals = {
  runs: 0,
  transcripts: new Set<string>(),
  compared: 0,
  engineSide: 0,
  differed: 0,
  refusals: 0,
  gatewayItems: 0,
  startupRefusals: 0,
};
/**
 * One gateway + agent per transport pair, shared by that pair's replays: each replay is its own
 * session in its own folder, and the recorded engine reads which transcript to play (and where
 * to log) from that folder's parent (TETHER_RECORDED_ENV_FILE), so nothing a replay checks
 * depends on a fresh gateway. (A stack per replay made this file about 40 % dearer in CPU.)
 */
async function startReplayStack(pair: { client: TransportName; agent: TransportName }, home: string): Promise<Stack> {
  return startStack({
    engine: 'claude',
    engineCommand: RECORDED_ENGINE,
    engineEnv: { HOME: home, TETHER_RECORDED_ENV_FILE: join('..', REPLAY_ENV_FILE) },
    clientTransport: pair.client,
    agentTransport: pair.agent,
    agentOptions: { engineFlags: REPLAY_FLAG_POLICY },
  });
}

/** The replay's settings for the recorded engine, in the parent of the session's folder. */
const REPLAY_ENV_FILE = 'tether-replay-env.json';

async function replay(
  t: Transcript,
  stack: Stack,
  pair: { client: TransportName; agent: TransportName },
  home: string | undefined,
): Promise<RunResult> {
  const plan = planFor(t);
  const dir = mkdtempSync(join(tmpdir(), 'tether-fidelity-'));
  const cwd = join(dir, 'cwd');
  mkdirSync(cwd);
  const logPath = join(dir, 'host.ndjson');
  const tracePath = join(dir, 'trace.ndjson');
  const refusedIdx = Object.keys(plan.special.refused ?? {}).map(Number);
  const engineEnv: Record<string, string> = {
    HOME: home ?? dir,
    TETHER_RECORDED_TRANSCRIPT: t.path,
    TETHER_RECORDED_LOG: logPath,
    TETHER_RECORDED_TRACE: tracePath,
    TETHER_RECORDED_SKIP: refusedIdx.join(','),
    TETHER_RECORDED_UNTIL: plan.special.until === undefined ? '' : String(plan.special.until),
    TETHER_RECORDED_PRELUDE: plan.agentInit ? '' : join(FIXTURES, `${PRELUDE}.ndjson`),
    ...t.index.env_added,
  };
  writeFileSync(join(dir, REPLAY_ENV_FILE), JSON.stringify(engineEnv));
  const options = { cwd, extra_args: plan.extraArgs };
  const result: RunResult = { compared: 0, engineSide: 0, differed: 0, refusals: 0, gatewayItems: 0, diffs: [] };
  const diff = (msg: string) => result.diffs.push(`${t.name} [client ${pair.client}, agent ${pair.agent}]: ${msg}`);
  // A client of its own: a replay that breaks its connection cannot disturb the others.
  let client: GatewayClient | undefined;
  try {
    client = await GatewayClient.connect({ gateway: stack.url, token: stack.token, reconnect: false });

    if (t.name.startsWith('56_')) {
      // --settings cannot be asked for: the agent's allow list refuses it before any spawn.
      const err = await client.createSession({ agent: 'test-agent', options: { cwd, extra_args: ['--settings', '{}'] } }).then(
        () => undefined,
        (e: unknown) => asTetherError(e),
      );
      if (err?.code !== 'PERMISSION_DENIED')
        diff(`--settings through extra_args: expected PERMISSION_DENIED, got ${err ? err.code : 'a session'}`);
      else result.refusals++;
    }

    if (plan.startupRefusal) {
      await startupRefusal(plan, client, options, diff, result);
      // (a) the engine saw only the agent's initialize before it gave up.
      const host = readLines(logPath);
      result.compared++;
      result.engineSide++;
      if (host.length !== 1 || canon(JSON.parse(host[0])) !== canon(AGENT_INIT)) {
        result.differed++;
        diff(`the engine should have received only the agent's initialize, got ${host.map((l) => short(l, 200)).join(' | ')}`);
      }
    } else {
      const session = await withTimeout(client.createSession({ agent: 'test-agent', options }), 10_000, 'session.create');
      const collector = new Collector(session);
      try {
        await drive(plan, client, session, collector, tracePath, diff, result);
      } catch (err) {
        diff(`driving the replay failed: ${(err as Error).message}`);
      }
      await collector.waitFor(() => collector.ended, 15_000, 'the exited event').catch((err: Error) => diff(err.message));
      compareRun(plan, readLines(logPath), readTrace(tracePath), collector, diff, result);
    }
    checkArgv(plan, readTrace(tracePath), diff);
  } finally {
    await client?.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

/** 64, 65, 82c, 83: the engine exits before answering initialize. */
async function startupRefusal(
  plan: Plan,
  client: GatewayClient,
  options: { cwd: string; extra_args: string[] },
  diff: (m: string) => void,
  result: RunResult,
): Promise<void> {
  const err = await withTimeout(client.createSession({ agent: 'test-agent', options }), 10_000, 'session.create').then(
    () => undefined,
    (e: unknown) => asTetherError(e),
  );
  result.compared++;
  if (!err) {
    result.differed++;
    diff('session.create succeeded although the engine refused to start');
    return;
  }
  const tail = (plan.t.meta.stderr_tail ?? '').trim();
  const want = `code ${plan.exitCode}`;
  if (err.code !== 'FAILED_PRECONDITION' || !err.message.includes(want) || (tail && !err.message.includes(tail))) {
    result.differed++;
    diff(
      `session.create error should be FAILED_PRECONDITION with "${want}" and the stderr tail ${JSON.stringify(tail)}; got ${err.code}: ${err.message}`,
    );
  }
  totals.startupRefusals++;
}

/** Sends the host frames at the points the transcript shows; performs the host actions. */
async function drive(
  plan: Plan,
  client: GatewayClient,
  session: RemoteSession,
  collector: Collector,
  tracePath: string,
  diff: (m: string) => void,
  result: RunResult,
): Promise<void> {
  let visible = 0;
  let firstInSeen = false;
  for (let i = 0; i < plan.entries.length; i++) {
    const e = plan.entries[i];
    if (e.prelude) continue; // the agent's own handshake
    if (e.dir === 'in') {
      if (!firstInSeen && plan.agentInit) {
        firstInSeen = true; // played by the agent's initialize
        continue;
      }
      firstInSeen = true;
      await collector.waitVisible(visible);
      const refusal = plan.special.refused?.[e.index];
      if (refusal) {
        await assertRefusal(e, refusal, client, session, diff);
        result.refusals++;
        continue;
      }
      const status = await session.send(e.frame!);
      if (status !== 'applied') diff(`line ${e.index + 1}: session.send answered ${status}`);
      continue;
    }
    if (e.dir === 'out') {
      if (!plan.reactions.has(e.index) && e.index !== plan.consumed) visible++;
      continue;
    }
    if (e.dir === 'note') {
      const group = [e];
      while (plan.entries[i + 1]?.dir === 'note') group.push(plan.entries[++i]);
      await collector.waitVisible(visible);
      const notes = group.map((n) => n.note ?? '');
      if (notes.includes(SIGINT_NOTE)) {
        if (!plan.special.sigintFromTest) throw new Error('SIGINT note without sigintFromTest');
        const start = readTrace(tracePath).find((x) => x.ev === 'start');
        process.kill(start!.pid as number, 'SIGINT');
      }
      if (notes.includes(EOF_NOTE) || notes.includes(SIGTERM_NOTE)) {
        await withTimeout(session.stop(), 15_000, 'session.stop');
      }
      continue;
    }
    if (e.dir === 'exit') break;
  }
  if (plan.special.until !== undefined) {
    // The rest of the transcript cannot happen behind the gateway: stop the (still alive) engine.
    await collector.waitVisible(visible);
    await withTimeout(session.stop(), 15_000, 'session.stop');
  }
}

async function assertRefusal(
  e: Entry,
  refusal: Refusal,
  client: GatewayClient,
  session: RemoteSession,
  diff: (m: string) => void,
): Promise<void> {
  if ('absorbed' in refusal) {
    const status = await session.send(e.frame!);
    if (status !== 'applied') diff(`line ${e.index + 1} (${refusal.why}): expected applied, got ${status}`);
    return;
  }
  let outcome: string;
  try {
    if (e.raw !== undefined) {
      // The library only sends objects; speak the protocol directly with the raw string.
      const peer = await client.peer();
      await peer.request('session.send', { session_id: session.id, input_id: randomUUID(), line: e.raw as unknown as Frame });
    } else {
      await session.send(e.frame!);
    }
    outcome = 'accepted';
  } catch (err) {
    outcome = asTetherError(err).code;
  }
  if (outcome !== refusal.code)
    diff(`line ${e.index + 1} (${refusal.why}): expected the gateway to refuse with ${refusal.code}, got ${outcome}`);
}

function readLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8').split('\n').slice(0, -1);
}

function readTrace(path: string): Frame[] {
  return readLines(path).map((l) => JSON.parse(l) as Frame);
}

function checkArgv(plan: Plan, trace: Frame[], diff: (m: string) => void): void {
  const start = trace.find((x) => x.ev === 'start');
  if (!start) return diff('the recorded engine never started');
  const extra = checkExtraArgs(plan.extraArgs, REPLAY_FLAG_POLICY);
  const want = [...STREAM_JSON_FLAGS, ...defaultModeArgs({}, extra), ...extra];
  if (JSON.stringify(start.argv) !== JSON.stringify(want))
    diff(`engine argv ${JSON.stringify(start.argv)}, expected ${JSON.stringify(want)}`);
}

/** The recorded frame with a control_response's request_id set to the id the host used. */
function withResponseId(frame: Frame, id: string | undefined): Frame {
  const r = responseOf(frame)!;
  const { subtype, request_id: _old, ...rest } = r;
  return { ...frame, response: id === undefined ? { subtype, ...rest } : { subtype, request_id: id, ...rest } };
}

function compareRun(
  plan: Plan,
  hostLines: string[],
  trace: Frame[],
  collector: Collector,
  diff: (m: string) => void,
  result: RunResult,
): void {
  const written = trace.filter((x) => x.ev === 'out').map((x) => x.line as string);
  const mismatch = trace.find((x) => x.ev === 'mismatch');
  if (mismatch) diff(`recorded engine reported: ${String(mismatch.message)}`);
  if (collector.error) diff(`session iteration failed: ${String(collector.error)}`);

  /** Recorded host request id → id the engine saw (in time order, like the engine). */
  const hostIds = new Map<string, string | undefined>();
  const clientGwIds = new Set<string>();
  const engineRequestIds = new Set<string>();
  const NO_ID = '\u0000';
  const expectedVisible: { kind: 'engine' | 'reply'; line: string; what: string }[] = [];
  const sentPrompts: unknown[] = [];
  let h = 0;
  let w = 0;
  let firstIn = true;
  const cmp = (ok: boolean, msg: () => string) => {
    result.compared++;
    if (!ok) {
      result.differed++;
      diff(msg());
    }
  };

  for (const e of plan.entries) {
    if (e.dir === 'in') {
      const agentsOwn = firstIn && (plan.agentInit || e.prelude);
      firstIn = false;
      if (plan.special.refused?.[e.index]) continue;
      if (!e.prelude && !agentsOwn && e.frame?.type === 'user') sentPrompts.push(e.frame.message);
      const actualLine = hostLines[h++];
      result.engineSide++;
      const where = e.prelude ? 'agent initialize (prelude)' : `host frame, line ${e.index + 1}`;
      if (actualLine === undefined) {
        cmp(false, () => `${where}: the engine never received ${short(JSON.stringify(e.frame ?? e.raw))}`);
        continue;
      }
      let actual: Frame;
      try {
        actual = JSON.parse(actualLine) as Frame;
      } catch {
        cmp(false, () => `${where}: the engine received a non-JSON line ${short(actualLine)}`);
        continue;
      }
      const f = e.frame!;
      const key = (f.request_id as string | undefined) ?? NO_ID;
      if (agentsOwn) {
        // The agent's own initialize stands for the transcript's (docs: "performs the engine's initialize itself").
        cmp(
          canon(actual) === canon(AGENT_INIT) && canon({ ...f, request_id: AGENT_INIT_REQUEST_ID }) === canon(AGENT_INIT),
          () => `${where}: ${short(actualLine)} is not the agent's initialize for ${short(JSON.stringify(f))}`,
        );
        hostIds.set(key, AGENT_INIT_REQUEST_ID);
        continue;
      }
      if (f.type === 'control_request' || f.type === 'control_cancel_request') {
        // Documented rewrite: request_id → tether-N (added when absent), consistent per request.
        const gw = actual.request_id;
        const ok =
          typeof gw === 'string' &&
          /^tether-\d+$/.test(gw) &&
          (f.type === 'control_request' ? !clientGwIds.has(gw) : hostIds.get(key) === gw) &&
          canon({ ...f, request_id: gw }) === canon(actual);
        cmp(
          ok,
          () => `${where}: expected ${short(JSON.stringify(f))} with request_id rewritten to a fresh tether-N, got ${short(actualLine)}`,
        );
        if (typeof gw === 'string') {
          hostIds.set(key, gw);
          clientGwIds.add(gw);
        }
        continue;
      }
      if (f.type === 'user') {
        // Documented stamp (docs/protocol.md): a uuid when the frame had none (whose turn it is), an origin when it named none.
        const uuid = actual.uuid;
        const ok =
          typeof uuid === 'string' &&
          (f.uuid === undefined || f.uuid === uuid) &&
          canon({ ...f, uuid, origin: f.origin ?? { kind: 'human' } }) === canon(actual);
        cmp(ok, () => `${where}: expected ${short(JSON.stringify(f))} stamped with a uuid and an origin, got ${short(actualLine)}`);
        continue;
      }
      // Documented: an answer's session allow rules stay at the gateway (docs/policy.md, per-person rules).
      const sent = f.type === 'control_response' ? withoutSessionAllows(f) : f;
      cmp(canon(actual) === canon(sent), () => `${where}: expected ${short(JSON.stringify(sent))}, got ${short(actualLine)}`);
      continue;
    }
    if (e.dir !== 'out' || plan.reactions.has(e.index)) continue;
    // What the recorded engine must have written (checks the recorded engine itself).
    const f = e.frame!;
    let expectedFrame = f;
    let mappedId: string | undefined;
    if (f.type === 'control_response' && responseOf(f)) {
      const key = (responseOf(f)!.request_id as string | undefined) ?? NO_ID;
      if (hostIds.has(key)) {
        mappedId = hostIds.get(key);
        expectedFrame = withResponseId(f, mappedId);
      }
    }
    if (f.type === 'control_request' && typeof f.request_id === 'string') engineRequestIds.add(f.request_id);
    const line = written[w++];
    if (line === undefined) {
      diff(`the recorded engine never wrote line ${e.index + 1} (${short(JSON.stringify(f), 120)})`);
      result.compared++;
      result.differed++;
      continue;
    }
    if (canon(JSON.parse(line)) !== canon(expectedFrame))
      diff(`recorded engine wrote ${short(line)} for line ${e.index + 1}, expected ${short(JSON.stringify(expectedFrame))}`);
    if (e.index === plan.consumed) continue; // the agent's initialize answer: consumed, never relayed
    if (mappedId !== undefined && clientGwIds.has(mappedId)) {
      // A reply to the client's own request: its original id restored (or absent, as sent).
      expectedVisible.push({ kind: 'reply', line: JSON.stringify(f), what: `reply, line ${e.index + 1}` });
    } else {
      expectedVisible.push({ kind: 'engine', line, what: `engine frame, line ${e.index + 1}` });
    }
  }
  if (h < hostLines.length) {
    result.compared++;
    result.engineSide++;
    result.differed++;
    diff(
      `the engine received frames the transcript does not have: ${hostLines
        .slice(h)
        .map((l) => short(l, 200))
        .join(' | ')}`,
    );
  }
  if (w < written.length)
    diff(
      `the recorded engine wrote more than expected: ${written
        .slice(w)
        .map((l) => short(l, 200))
        .join(' | ')}`,
    );

  // (b) every engine frame / reply, exactly and in order.
  const items = collector.items;
  const visible = items.filter(isVisible);
  for (let i = 0; i < Math.max(expectedVisible.length, visible.length); i++) {
    const want = expectedVisible[i];
    const got = visible[i];
    cmp(
      !!want && !!got && got.kind === want.kind && (got.kind === 'reply' || got.kind === 'engine') && got.line === want.line,
      () =>
        `client item ${i + 1}: expected ${want ? `${want.what}: ${short(want.line)}` : 'nothing'}, got ${got ? `${describeItem(got)}: ${short((got as { line: string }).line)}` : 'nothing'}`,
    );
  }

  // (c) everything else is gateway-origin and documented; (d) the exit code.
  const prompts: unknown[] = [];
  const exits: number[] = [];
  items.forEach((item, i) => {
    if (isVisible(item)) return;
    result.gatewayItems++;
    if (item.kind === 'event') {
      const ev = item.event;
      if (!GATEWAY_EVENT_SUBTYPES.has(ev.subtype)) diff(`unexpected gateway event ${ev.subtype}: ${short(JSON.stringify(ev))}`);
      if (ev.subtype === 'prompt') prompts.push(ev.message);
      if (ev.subtype === 'prompt_decided' && !engineRequestIds.has(ev.request_id))
        diff(`prompt_decided for ${ev.request_id}, which the engine never raised`);
      if (ev.subtype === 'exited') {
        exits.push(i);
        const want = plan.exitCode;
        cmp(
          ev.code === want && ev.signal === null,
          () => `exited event: expected code ${want}, got code ${ev.code} signal ${ev.signal} (stderr: ${short(ev.stderr_tail)})`,
        );
        const tail = (plan.t.meta.stderr_tail ?? '').trim().split('\n').at(-1) ?? '';
        if (plan.special.until === undefined && tail && !ev.stderr_tail.includes(tail))
          diff(`exited.stderr_tail lacks the recorded stderr ${JSON.stringify(tail)}`);
      }
      return;
    }
    if (item.kind === 'engine') {
      // Gateway-origin lines: only withdrawals of prompts the engine raised.
      const m = item.message;
      const ok =
        m.type === 'control_cancel_request' &&
        typeof m.request_id === 'string' &&
        engineRequestIds.has(m.request_id) &&
        item.line === JSON.stringify({ type: 'control_cancel_request', request_id: m.request_id });
      if (!ok) diff(`unexpected gateway-origin line ${short(item.line)}`);
    }
  });
  if (exits.length !== 1 || exits[0] !== items.length - 1)
    diff(`expected exactly one exited event, last; got ${exits.length} (items: ${items.map(describeItem).join(', ')})`);
  if (canon(prompts) !== canon(sentPrompts))
    diff(`prompt events ${short(JSON.stringify(prompts))} do not match the user messages sent ${short(JSON.stringify(sentPrompts))}`);
}

// ---- the suite -----------------------------------------------------------------------------

beforeAll(() => {
  chmodSync(RECORDED_ENGINE, 0o755);
});

afterAll(() => {
  console.log(
    `fidelity: ${totals.transcripts.size} transcripts replayed on ${PAIRS.length} transport pairs (${totals.runs} runs), ` +
      `${totals.compared} frames compared (${totals.engineSide} received by the engine, ${totals.compared - totals.engineSide} by the client incl. exits), ${totals.differed} differed; ${totals.refusals} gateway refusals asserted, ` +
      `${totals.startupRefusals} start-up refusals, ${totals.gatewayItems} gateway-origin items checked`,
  );
});

describe('engine fixtures', () => {
  it('index.json lists every transcript in the folder, and every one is replayed', () => {
    const files = readdirSync(FIXTURES)
      .filter((f) => f.endsWith('.ndjson'))
      .sort();
    expect(INDEX.map((e) => e.file).sort()).toEqual(files);
    expect(GROUPS.flatMap((g) => g.transcripts).sort()).toEqual(files.map((f) => f.replace(/\.ndjson$/, '')));
    for (const name of Object.keys(SPECIAL)) expect(TRANSCRIPTS.has(name), name).toBe(true);
  });

  it('the special cases are exactly the transcripts that need them', () => {
    const plans = [...TRANSCRIPTS.values()].map(planFor);
    expect(plans.filter((p) => p.startupRefusal).map((p) => p.t.name)).toEqual(STARTUP_REFUSALS);
    expect(plans.filter((p) => !p.agentInit).map((p) => p.t.name)).toEqual(NEED_PRELUDE);
    // Every raw (non-JSON) line and every frame the gateway refuses is listed with its refusal.
    for (const p of plans) {
      for (const e of p.t.entries) {
        if (e.dir === 'in' && e.raw !== undefined) expect(p.special.refused?.[e.index], `${p.t.name} line ${e.index + 1}`).toBeDefined();
        if (e.dir === 'note' && e.note === SIGINT_NOTE) expect(p.special.sigintFromTest, p.t.name).toBe(true);
      }
      // Flags a client cannot ask for through Tether are named, with the reason.
      const expressible = JSON.stringify([...STREAM_JSON_FLAGS, ...p.extraArgs]) === JSON.stringify(p.t.index.argv);
      expect(!!p.special.argvDiffers, `${p.t.name} argv ${JSON.stringify(p.t.index.argv)}`).toBe(!expressible);
    }
  });
});

describe.concurrent.each(PAIRS)('fidelity: client over $client, agent over $agent', (pair) => {
  let stack: Stack;
  let home: string;
  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'tether-fidelity-agent-'));
    stack = await startReplayStack(pair, home);
  });
  afterAll(async () => {
    await stack?.stop();
    rmSync(home, { recursive: true, force: true });
  });

  it.each(GROUPS)('$name', { timeout: 40_000 }, async ({ transcripts }) => {
    const shared = transcripts.length > 1 ? mkdtempSync(join(tmpdir(), 'tether-fidelity-home-')) : undefined;
    const diffs: string[] = [];
    try {
      for (const name of transcripts) {
        const r = await replay(TRANSCRIPTS.get(name)!, stack, pair, shared);
        totals.runs++;
        totals.transcripts.add(name);
        totals.compared += r.compared;
        totals.engineSide += r.engineSide;
        totals.differed += r.differed;
        totals.refusals += r.refusals;
        totals.gatewayItems += r.gatewayItems;
        diffs.push(...r.diffs);
      }
    } finally {
      if (shared) rmSync(shared, { recursive: true, force: true });
    }
    expect(diffs).toEqual([]);
  });
});
