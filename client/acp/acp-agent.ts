/**
 * An ACP agent (Agent Client Protocol, the official SDK's v1 API) backed by Tether sessions:
 * each ACP session is an ordinary Tether session on one agent, so teammates can attach to it
 * from the terminal or the web. One app per ACP connection (it holds that connection's
 * sessions). What is covered and what is not: docs/acp.md.
 */
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import * as acp from '@agentclientprotocol/sdk';
import { asTetherError, ERROR_TABLE, TetherError } from '../../core/errors.js';
import { PermissionMode } from '../../core/protocol/session-options.js';
import { INPUT_REFUSED } from '../../core/protocol/events.js';
import type { GatewayClient } from '../gateway-client.js';
import { asPermissionRequest, type PermissionAnswer, type PermissionRequest } from '../permission-policy.js';
import type { RemoteSession, SessionItem } from '../remote-session.js';
import { EngineUpdates, toolKind, toolTitle } from './engine-updates.js';
import { askByElicitation, askByPermissionOptions } from './questions.js';

export interface TetherAcpOptions {
  /** The gateway client this connection's sessions run on (opened lazily, at the first session). */
  client: () => Promise<GatewayClient>;
  /**
   * The Tether agent (build machine) sessions run on. Absent: the only agent connected to
   * the gateway (session/new fails with a clear error when there are none or several).
   */
  agent?: string;
  /**
   * The remote working folder for every session. Absent: the agent's own default folder
   * (the editor's cwd is a path on the editor's machine and is not sent; docs/acp.md).
   */
  cwd?: string;
  version?: string;
  /** Called once the ACP connection has closed and its gateway client with it. */
  onClosed?: () => void;
}

/** Longest session/load waits for the replayed history before it answers anyway. */
const LOAD_HISTORY_WAIT_MS = 30_000;

/** Permission modes offered as ACP session modes (the engine's own names). */
const MODES: acp.SessionMode[] = [
  { id: 'default', name: 'Default', description: 'Ask before running tools that need approval' },
  { id: 'acceptEdits', name: 'Accept edits', description: 'Edit files without asking' },
  { id: 'plan', name: 'Plan', description: 'Plan only: no edits, no commands' },
  { id: 'bypassPermissions', name: 'Bypass permissions', description: 'Run every tool without asking' },
];

/** The permission options every `can_use_tool` prompt offers the editor. */
export const PERMISSION_OPTIONS: acp.PermissionOption[] = [
  { optionId: 'allow', name: 'Allow once', kind: 'allow_once' },
  { optionId: 'allow_always', name: 'Allow always (this session)', kind: 'allow_always' },
  { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
];

interface Turn {
  resolve: (r: acp.PromptResponse) => void;
  reject: (e: unknown) => void;
  cancelled: boolean;
  /** The prompt's uuid: the result that names it ends this turn (a teammate's turn may run first). */
  uuid: string;
}

/** One ACP session: its Tether session and the state of the turn in flight. */
class AcpSession {
  readonly updates = new EngineUpdates();
  turn: Turn | undefined;
  /** Permission requests open in the editor, by engine request id. */
  readonly pending = new Map<string, AbortController>();
  /** Tools the editor allowed for the rest of the session. */
  readonly alwaysAllowed = new Set<string>();
  /** Prompts met in the replayed history, asked once it is through if nobody settled them. */
  deferred: PermissionRequest[] = [];
  /** Resolves once the history sent on attach has been read (at once for a new session). */
  readonly historyRead: Promise<void>;
  historyDone!: () => void;
  /** Notifications are sent one after another, in the engine's order. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    readonly remote: RemoteSession,
    readonly editor: acp.AgentContext,
    readonly clientCaps: acp.ClientCapabilities | undefined,
  ) {
    this.historyRead = new Promise((resolve) => (this.historyDone = resolve));
    // Not lastSeq: frames of the history may sit unread in the session's queue already.
    if (remote.historyEnd === 0) this.historyDone();
  }

  /** Resolves once every notification sent so far has been written. */
  flushed(): Promise<void> {
    return this.chain;
  }

  get id(): string {
    return this.remote.id;
  }

  notify(update: acp.SessionUpdate): Promise<void> {
    this.chain = this.chain
      .then(() => this.editor.notify(acp.methods.client.session.update, { sessionId: this.id, update }))
      .catch(() => {});
    return this.chain;
  }

  endTurn(r: acp.PromptResponse | TetherError): void {
    const t = this.turn;
    this.turn = undefined;
    if (!t) return;
    // Everything the turn streamed reaches the editor before its answer.
    void this.chain.then(() => (r instanceof TetherError ? t.reject(acpError(r)) : t.resolve(r)));
  }
}

/** A TetherError as the JSON-RPC error the editor sees (our code's JSON-RPC number, our code in data). */
function acpError(e: TetherError): acp.RequestError {
  if (e.code === 'NOT_FOUND') return acp.RequestError.resourceNotFound(e.message);
  return new acp.RequestError(ERROR_TABLE[e.code].jsonRpc, e.message, { code: e.code });
}

/** The stop reason of a turn from the engine's `result` frame. */
function stopReason(result: Record<string, unknown>, cancelled: boolean): acp.StopReason {
  if (cancelled) return 'cancelled';
  if (result.subtype === 'error_max_turns') return 'max_turn_requests';
  if (result.stop_reason === 'max_tokens') return 'max_tokens';
  if (result.stop_reason === 'refusal') return 'refusal';
  return 'end_turn';
}

/** The prompt's content blocks as the engine's user content (text; resources inlined). */
function promptText(blocks: acp.ContentBlock[]): string {
  return blocks
    .map((b) => {
      if (b.type === 'text') return b.text;
      if (b.type === 'resource_link') return mention(b.uri);
      if (b.type === 'resource') {
        const r = b.resource as { uri: string; text?: string };
        return r.text !== undefined ? `<context ref="${r.uri}">\n${r.text}\n</context>` : mention(r.uri);
      }
      throw acp.RequestError.invalidParams({ type: b.type }, `prompt content of type ${b.type} is not supported (see promptCapabilities)`);
    })
    .join('\n');
}

/**
 * A resource as an @-mention: a file URI as its path (quoted when it holds a space), which the
 * engine reads into the prompt (and the gateway and agent judge first: core/policy/mentions.ts);
 * any other URI as it is.
 */
function mention(uri: string): string {
  if (!uri.startsWith('file:')) return `@${uri}`;
  let path: string;
  try {
    path = fileURLToPath(uri);
  } catch {
    throw acp.RequestError.invalidParams({ uri }, `resource URI ${uri} is not a local file path`);
  }
  if (!/\s/.test(path)) return `@${path}`;
  if (path.includes('"'))
    throw acp.RequestError.invalidParams({ uri }, `resource path ${path} holds both a space and a quote, which an @-mention cannot spell`);
  return `@"${path}"`;
}

/** The one agent connected to the gateway, for connections that named none. */
async function onlyAgent(c: GatewayClient): Promise<string> {
  const agents = await c.listAgents();
  if (agents.length !== 1)
    throw new TetherError(
      'INVALID_ARGUMENT',
      `name the agent to run on (${agents.length} are connected: ${agents.map((a) => a.name).join(', ') || 'none'}); with /acp: /acp?agent=NAME`,
    );
  return agents[0].name;
}

/** Builds the ACP agent app for one connection. */
export function tetherAcpAgent(opts: TetherAcpOptions): acp.AgentApp {
  const sessions = new Map<string, AcpSession>();
  let clientCaps: acp.ClientCapabilities | undefined;
  let gateway: Promise<GatewayClient> | undefined;
  const client = () =>
    (gateway ??= opts.client().catch((err) => {
      gateway = undefined;
      throw err;
    }));
  const find = (id: string) => {
    const s = sessions.get(id);
    if (!s) throw acp.RequestError.resourceNotFound(id);
    return s;
  };

  const app = acp
    .agent({ name: 'tether' })
    .onConnect((conn) => {
      // The editor went away: its sessions keep running on the agent (teammates may be on them).
      void conn.closed.then(async () => {
        const c = gateway && (await gateway.catch(() => undefined));
        await c?.close();
        opts.onClosed?.();
      });
    })
    .onRequest(acp.methods.agent.initialize, ({ params }) => {
      clientCaps = params.clientCapabilities;
      return {
        protocolVersion: acp.PROTOCOL_VERSION,
        agentCapabilities: { loadSession: true, promptCapabilities: { image: false, audio: false, embeddedContext: true } },
        agentInfo: { name: 'tether', title: 'Tether (remote Claude Code)', version: opts.version ?? '0.1.0' },
        authMethods: [],
      };
    })
    .onRequest(acp.methods.agent.session.new, async ({ client: editor }) => {
      let remote: RemoteSession;
      try {
        const c = await client();
        remote = await c.createSession({
          agent: opts.agent ?? (await onlyAgent(c)),
          options: { cwd: opts.cwd, include_partial_messages: true },
        });
      } catch (err) {
        throw acpError(asTetherError(err));
      }
      const s = start(remote, editor);
      return { sessionId: s.id, modes: { currentModeId: 'default', availableModes: MODES } };
    })
    .onRequest(acp.methods.agent.session.load, async ({ params, client: editor }) => {
      // Any Tether session this principal may attach to: the editor's own from before, or a teammate's.
      if (sessions.has(params.sessionId))
        throw acp.RequestError.invalidRequest(undefined, 'this session is already loaded on this connection');
      let remote: RemoteSession;
      try {
        remote = await (await client()).attach(params.sessionId);
      } catch (err) {
        throw acpError(asTetherError(err));
      }
      const s = start(remote, editor);
      // ACP: the history is streamed as session/update first, then the answer (bounded: a
      // history with a gap would otherwise hold the answer until the next frame).
      await Promise.race([s.historyRead, new Promise((r) => setTimeout(r, LOAD_HISTORY_WAIT_MS).unref())]);
      await s.flushed();
      return { modes: { currentModeId: remote.info.options.permission_mode ?? 'default', availableModes: MODES } };
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params }) => {
      const s = find(params.sessionId);
      if (s.turn) throw acp.RequestError.invalidRequest(undefined, 'a prompt turn is already running in this session');
      const content = promptText(params.prompt);
      const uuid = randomUUID();
      const done = new Promise<acp.PromptResponse>((resolve, reject) => (s.turn = { resolve, reject, cancelled: false, uuid }));
      try {
        // Sent while a teammate's turn runs, it is queued and runs after it (the gateway says so: `queued`).
        await s.remote.send(content, { uuid });
      } catch (err) {
        s.turn = undefined;
        throw acpError(asTetherError(err));
      }
      return done;
    })
    .onNotification(acp.methods.agent.session.cancel, async ({ params }) => {
      const s = sessions.get(params.sessionId);
      if (!s?.turn) return;
      s.turn.cancelled = true;
      // Still queued behind a teammate's turn: withdraw it and leave their turn alone (the
      // gateway knows; it refuses once the prompt started, and then the turn is ours to stop).
      if (
        await s.remote.withdraw(s.turn.uuid).then(
          () => true,
          () => false,
        )
      )
        return;
      for (const ac of s.pending.values()) ac.abort();
      await s.remote.interrupt().catch(() => {});
    })
    .onRequest(acp.methods.agent.session.setMode, async ({ params }) => {
      const s = find(params.sessionId);
      const mode = PermissionMode.safeParse(params.modeId);
      if (!mode.success || !MODES.some((m) => m.id === params.modeId))
        throw acp.RequestError.invalidParams({ modeId: params.modeId }, `unknown mode; one of ${MODES.map((m) => m.id).join(', ')}`);
      try {
        await s.remote.setPermissionMode(mode.data);
      } catch (err) {
        throw acpError(asTetherError(err));
      }
      await s.notify({ sessionUpdate: 'current_mode_update', currentModeId: mode.data });
      return {};
    });

  function start(remote: RemoteSession, editor: acp.AgentContext): AcpSession {
    const s = new AcpSession(remote, editor, clientCaps);
    sessions.set(s.id, s);
    void pump(s).finally(() => {
      sessions.delete(s.id);
      s.historyDone();
    });
    return s;
  }

  /** Reads the session's stream for its whole life: updates, prompts, the end of each turn. */
  async function pump(s: AcpSession): Promise<void> {
    try {
      for await (const item of s.remote) {
        read(s, item);
        if (item.kind !== 'reply' && item.seq !== 0 && item.seq >= s.remote.historyEnd) {
          s.historyDone();
          for (const ask of s.deferred.splice(0)) void decide(s, ask);
        }
      }
      s.endTurn(new TetherError('UNAVAILABLE', 'the session ended'));
    } catch (err) {
      s.endTurn(asTetherError(err));
    }
  }

  /** One item of the session's stream: an update, a prompt, a withdrawal, the end of a turn. */
  function read(s: AcpSession, item: SessionItem): void {
    const inHistory = item.kind !== 'reply' && item.seq !== 0 && item.seq <= s.remote.historyEnd;
    if (item.kind === 'event') {
      if (item.event.subtype === 'exited')
        s.endTurn(new TetherError('UNAVAILABLE', `the engine exited (code ${item.event.code ?? 'none'})`));
      // The agent refused the prompt before the engine saw it (an @-mention outside the session's folders): no turn comes.
      if (item.event.subtype === 'engine_error' && item.event.code === INPUT_REFUSED && !inHistory)
        s.endTurn(new TetherError('PERMISSION_DENIED', item.event.message));
      // Withdrawn (a cancel while queued) or cleared by someone's stop: it never ran.
      const e = item.event;
      const gone =
        e.subtype === 'queued' &&
        (e.change.action === 'withdrawn' || e.change.action === 'cleared') &&
        s.turn !== undefined &&
        e.change.uuids.includes(s.turn.uuid);
      if (gone) s.endTurn({ stopReason: 'cancelled' });
      return;
    }
    if (item.kind !== 'engine') return;
    const m = item.message;
    if (m.type === 'control_cancel_request') {
      // The engine withdrew the prompt, or another client decided it: withdraw it in the editor.
      s.pending.get(String(m.request_id))?.abort();
      s.deferred = s.deferred.filter((a) => a.requestId !== m.request_id);
      return;
    }
    const ask = item.origin === 'engine' ? asPermissionRequest(m) : undefined;
    if (ask) {
      if (inHistory) s.deferred.push(ask);
      else void decide(s, ask);
      return;
    }
    if (m.type === 'result') {
      // Only the turn that answered this editor's prompt ends it (an engine that names none: any).
      const uuids = Array.isArray(m.user_message_uuids) ? m.user_message_uuids : [];
      if (s.turn && (uuids.length === 0 || uuids.includes(s.turn.uuid))) s.endTurn({ stopReason: stopReason(m, s.turn.cancelled) });
      return;
    }
    for (const u of s.updates.read(m)) void s.notify(u);
  }

  /** Asks the editor about one `can_use_tool` prompt and answers the engine (unless withdrawn). */
  async function decide(s: AcpSession, ask: PermissionRequest): Promise<void> {
    if (s.alwaysAllowed.has(ask.toolName)) return answer(s, ask, { behavior: 'allow', updatedInput: ask.input });
    const ac = new AbortController();
    s.pending.set(ask.requestId, ac);
    const toolCallId = typeof ask.raw.tool_use_id === 'string' ? ask.raw.tool_use_id : ask.requestId;
    const toolCall: acp.ToolCallUpdate = {
      toolCallId,
      title: toolTitle(ask.toolName, ask.input),
      kind: toolKind(ask.toolName),
      status: 'pending',
      rawInput: ask.input,
    };
    try {
      await s.notify({ sessionUpdate: 'tool_call_update', toolCallId, status: 'pending' });
      let decision: PermissionAnswer & { always?: boolean };
      if (ask.toolName === 'AskUserQuestion') {
        decision = s.clientCaps?.elicitation?.form
          ? await askByElicitation(s.editor, s.id, toolCallId, ask.input, ac.signal)
          : await askByPermissionOptions(s.editor, s.id, toolCall, ask.input, ac.signal);
      } else {
        const r = await s.editor.request(
          acp.methods.client.session.requestPermission,
          { sessionId: s.id, toolCall, options: PERMISSION_OPTIONS },
          { cancellationSignal: ac.signal },
        );
        const chosen = r.outcome.outcome === 'selected' ? r.outcome.optionId : undefined;
        decision =
          chosen === 'allow' || chosen === 'allow_always'
            ? { behavior: 'allow', updatedInput: ask.input, always: chosen === 'allow_always' }
            : {
                behavior: 'deny',
                message: chosen ? 'Rejected in the editor' : 'Cancelled in the editor',
                interrupt: !chosen || s.turn?.cancelled === true,
              };
      }
      if (ac.signal.aborted) return; // withdrawn meanwhile: someone else (or the engine) settled it
      if (decision.behavior === 'allow' && decision.always) s.alwaysAllowed.add(ask.toolName);
      if (decision.behavior === 'allow') void s.notify({ sessionUpdate: 'tool_call_update', toolCallId, status: 'in_progress' });
      const { always: _a, ...reply } = decision as PermissionAnswer & { always?: boolean };
      await answer(s, ask, reply as PermissionAnswer);
    } catch (err) {
      if (!ac.signal.aborted)
        await answer(s, ask, { behavior: 'deny', message: `the editor could not be asked: ${asTetherError(err).message}` });
    } finally {
      s.pending.delete(ask.requestId);
    }
  }

  async function answer(s: AcpSession, ask: PermissionRequest, reply: PermissionAnswer): Promise<void> {
    // Another client may have decided first: the gateway refuses ours, which is fine.
    await s.remote.answer(ask.requestId, reply).catch(() => {});
  }

  return app;
}
