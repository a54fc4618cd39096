/**
 * Reads one session.frame (the bytes every member gets) into the dialect's vocabulary. Pure:
 * no session or client state. Each frame is parsed at most once however many dialect clients
 * receive it: the translation is cached on the frame's Buffer (the same object goes to every
 * member, and the replay log keeps it).
 */
import { INPUT_REFUSED, type PresenceChange, type QueueChange, type QueuedPrompt } from '../../../core/protocol/events.js';
import { presenceChanges } from '../../../core/protocol/presence.js';
import type { EngineInfo } from '../../session/session.js';

/** What the engine told about itself in system/init: the session keeps it (`Session.engineInfo`). */
export type { EngineInfo } from '../../session/session.js';

export type TurnStatus = 'completed' | 'interrupted' | 'error';

export type DialectEvent =
  | ({ kind: 'engine' } & EngineInfo)
  | { kind: 'message_start'; message_id: string }
  | { kind: 'token'; token: string; message_id?: string }
  | { kind: 'assistant_text'; message_id: string; text: string }
  | { kind: 'tool_use_start'; name: string; input: unknown; tool_use_id: string }
  | { kind: 'tool_result'; tool_use_id: string; content: string; is_error: boolean }
  | {
      kind: 'turn_complete';
      stop_reason: string | null;
      status: TurnStatus;
      usage: { input_tokens: number; output_tokens: number };
      user_message_uuids: string[];
    }
  | {
      kind: 'permission';
      request_id: string;
      tool: string;
      input: Record<string, unknown>;
      tool_use_id?: string;
      description?: string;
      suggestions?: unknown[];
    }
  | { kind: 'withdrawn'; request_id: string }
  | { kind: 'progress'; progress: Record<string, unknown> }
  | { kind: 'state'; state: string; reason?: string }
  | { kind: 'presence'; action: string; principal: string; client_id: string; role: string }
  | { kind: 'gap'; from_seq: number; to_seq: number }
  /** The agent refused the prompt sent with this uuid: no turn will answer it. */
  | { kind: 'refused'; uuid: string; message: string }
  /** The session's queue of prompts after a change (the `queued` event). */
  | { kind: 'queued'; prompts: QueuedPrompt[]; change: QueueChange };

export interface TranslatedFrame {
  session_id: string;
  seq: number;
  events: DialectEvent[];
  /**
   * The wire text of the notification made from `events[i]`, once the first client built it,
   * for every other client that gets the same one (filled by the client edge).
   */
  wire: string[];
}

type Obj = Record<string, unknown>;

const cache = new WeakMap<Buffer, TranslatedFrame>();

/** The translation of one session.frame, parsed once per Buffer. */
export function translateFrame(frame: Buffer): TranslatedFrame {
  let t = cache.get(frame);
  if (!t) {
    t = parseFrame(frame);
    cache.set(frame, t);
  }
  return t;
}

function parseFrame(frame: Buffer): TranslatedFrame {
  let params: { session_id?: unknown; seq?: unknown; origin?: unknown; message?: unknown; event?: unknown };
  try {
    params = (JSON.parse(frame.toString('utf8')) as { params: typeof params }).params ?? {};
  } catch {
    return { session_id: '', seq: 0, events: [], wire: [] };
  }
  const session_id = typeof params.session_id === 'string' ? params.session_id : '';
  const seq = typeof params.seq === 'number' ? params.seq : 0;
  const events = isObj(params.event)
    ? fromGatewayEvent(params.event)
    : isObj(params.message)
      ? translateLine(params.message, params.origin === 'engine')
      : [];
  return { session_id, seq, events, wire: [] };
}

/** Gateway events (docs/protocol.md) the dialect shows. */
function fromGatewayEvent(e: Obj): DialectEvent[] {
  switch (e.subtype) {
    case 'state':
      return [{ kind: 'state', state: String(e.state) }];
    case 'exited':
      return [{ kind: 'state', state: 'ended', reason: typeof e.reason === 'string' ? e.reason : undefined }];
    case 'gap':
      return [{ kind: 'gap', from_seq: Number(e.from_seq), to_seq: Number(e.to_seq) }];
    case 'engine_error':
      return e.code === INPUT_REFUSED && typeof e.input_uuid === 'string'
        ? [{ kind: 'refused', uuid: e.input_uuid, message: String(e.message) }]
        : [];
    case 'queued':
      return [{ kind: 'queued', prompts: e.prompts as QueuedPrompt[], change: e.change as QueueChange }];
    case 'presence':
      // One notification per change, as before coalescing (a burst's changes share one event).
      // `may_control` is for the owner's own clients; the dialect's presence keeps its documented fields.
      return presenceChanges(e as unknown as PresenceChange).map(({ may_control: _, ...c }) => ({ kind: 'presence', ...c }));
    default:
      return [];
  }
}

/**
 * One engine stdout line (engine-protocol.md section 4) as dialect events. `fromEngine`:
 * false for lines the gateway wrote in the engine's format (withdrawals), which never raise
 * a prompt. Lines the dialect has no word for yield nothing.
 */
export function translateLine(line: Obj, fromEngine = true): DialectEvent[] {
  switch (line.type) {
    case 'stream_event':
      return fromStreamEvent(line);
    case 'assistant':
      return fromAssistant(line);
    case 'user':
      return fromUser(line);
    case 'result':
      return [fromResult(line)];
    case 'system':
      return fromSystem(line);
    case 'tool_progress':
      return [{ kind: 'progress', progress: pick(line, ['tool_use_id', 'tool_name', 'elapsed_time_seconds'], { kind: 'tool' }) }];
    case 'control_request': {
      const r = line.request;
      if (!fromEngine || !isObj(r) || r.subtype !== 'can_use_tool' || typeof line.request_id !== 'string') return [];
      return [
        {
          kind: 'permission',
          request_id: line.request_id,
          tool: String(r.tool_name),
          input: isObj(r.input) ? r.input : {},
          tool_use_id: typeof r.tool_use_id === 'string' ? r.tool_use_id : undefined,
          description: typeof r.description === 'string' ? r.description : undefined,
          ...(Array.isArray(r.permission_suggestions) ? { suggestions: r.permission_suggestions } : {}),
        },
      ];
    }
    case 'control_cancel_request':
      return typeof line.request_id === 'string' ? [{ kind: 'withdrawn', request_id: line.request_id }] : [];
    default:
      return [];
  }
}

function fromStreamEvent(line: Obj): DialectEvent[] {
  const e = line.event;
  if (!isObj(e)) return [];
  if (e.type === 'message_start' && isObj(e.message) && typeof e.message.id === 'string')
    return [{ kind: 'message_start', message_id: e.message.id }];
  if (
    e.type === 'content_block_delta' &&
    isObj(e.delta) &&
    e.delta.type === 'text_delta' &&
    typeof e.delta.text === 'string' &&
    e.delta.text !== ''
  ) {
    return [{ kind: 'token', token: e.delta.text, message_id: typeof line.api_message_id === 'string' ? line.api_message_id : undefined }];
  }
  return [];
}

/** One assistant frame per completed content block: text (for clients without partial messages) and tool calls. */
function fromAssistant(line: Obj): DialectEvent[] {
  const m = line.message;
  if (!isObj(m) || !Array.isArray(m.content)) return [];
  const id = typeof m.id === 'string' ? m.id : '';
  const out: DialectEvent[] = [];
  for (const block of m.content) {
    if (!isObj(block)) continue;
    if (block.type === 'text' && typeof block.text === 'string' && block.text !== '')
      out.push({ kind: 'assistant_text', message_id: id, text: block.text });
    if (block.type === 'tool_use' && typeof block.id === 'string')
      out.push({ kind: 'tool_use_start', name: String(block.name), input: block.input ?? {}, tool_use_id: block.id });
  }
  return out;
}

function fromUser(line: Obj): DialectEvent[] {
  const m = line.message;
  if (!isObj(m) || !Array.isArray(m.content)) return [];
  const out: DialectEvent[] = [];
  for (const block of m.content) {
    if (!isObj(block) || block.type !== 'tool_result' || typeof block.tool_use_id !== 'string') continue;
    out.push({ kind: 'tool_result', tool_use_id: block.tool_use_id, content: flatten(block.content), is_error: block.is_error === true });
  }
  return out;
}

/**
 * Failure is judged on is_error (engine-protocol.md 4.1); an aborted turn is an interrupt.
 * `user_message_uuids` names every prompt the turn answered (two when one was folded in).
 */
function fromResult(line: Obj): DialectEvent {
  const usage = isObj(line.usage) ? line.usage : {};
  const aborted = typeof line.terminal_reason === 'string' && line.terminal_reason.startsWith('aborted');
  const status: TurnStatus = line.is_error !== true ? 'completed' : aborted ? 'interrupted' : 'error';
  const stop =
    typeof line.stop_reason === 'string' ? line.stop_reason : typeof line.terminal_reason === 'string' ? line.terminal_reason : null;
  const uuids = Array.isArray(line.user_message_uuids) ? line.user_message_uuids.filter((u): u is string => typeof u === 'string') : [];
  return {
    kind: 'turn_complete',
    stop_reason: stop,
    status,
    usage: { input_tokens: num(usage.input_tokens), output_tokens: num(usage.output_tokens) },
    user_message_uuids: uuids,
  };
}

function fromSystem(line: Obj): DialectEvent[] {
  switch (line.subtype) {
    case 'init':
      return [
        {
          kind: 'engine',
          model: typeof line.model === 'string' ? line.model : null,
          tools: Array.isArray(line.tools) ? line.tools.filter((t): t is string => typeof t === 'string') : [],
          mcp_servers: Array.isArray(line.mcp_servers)
            ? line.mcp_servers
                .filter(isObj)
                .map((s) => ({ name: String(s.name), status: typeof s.status === 'string' ? s.status : undefined }))
            : [],
        },
      ];
    case 'status':
      return line.status === 'requesting' ? [{ kind: 'progress', progress: { kind: 'requesting' } }] : [];
    case 'task_started':
    case 'task_notification':
      return [
        { kind: 'progress', progress: pick(line, ['task_id', 'tool_use_id', 'description', 'status', 'summary'], { kind: line.subtype }) },
      ];
    default:
      return [];
  }
}

/** Tool result content as text: strings as they are, text blocks joined, other blocks named. */
function flatten(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((b) => (isObj(b) && b.type === 'text' && typeof b.text === 'string' ? b.text : isObj(b) ? `[${String(b.type)}]` : ''))
    .join('\n');
}

function pick(line: Obj, keys: string[], base: Obj): Obj {
  const out: Obj = { ...base };
  for (const k of keys) if (line[k] !== undefined) out[k] = line[k];
  return out;
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
