/**
 * A session's stream turned into what the page shows: prompts with their sender, assistant
 * text (streamed, then final), thinking, tool calls with their results, permission prompts
 * with their fate, and notes (presence, roles, state, errors). Pure: no DOM, no network.
 */
import type { EngineMessage, StreamItem } from './frames.js';
import { policyLine } from '../../../client/tool-view.js';
import type { PresenceChange } from '../../../core/protocol/events.js';
import { presenceChanges } from '../../../core/protocol/presence.js';

export interface PermissionPrompt {
  requestId: string;
  toolName: string;
  input: Record<string, unknown>;
  /** The engine's whole can_use_tool request (suggestions, description, …). */
  request: Record<string, unknown>;
  status: 'pending' | 'decided' | 'withdrawn';
  decidedBy?: string;
  behavior?: string;
}

export type Entry =
  | { id: number; kind: 'prompt'; principal: string; text: string; images: number }
  | { id: number; kind: 'text'; text: string; streaming: boolean }
  | { id: number; kind: 'thinking'; text: string; streaming: boolean }
  | { id: number; kind: 'tool'; toolUseId: string; name: string; input: Record<string, unknown>; result?: { content: unknown; isError: boolean }; awaitingPermission?: boolean }
  | { id: number; kind: 'permission'; prompt: PermissionPrompt }
  | { id: number; kind: 'note'; text: string; tone: 'info' | 'error' };

const obj = (v: unknown): Record<string, unknown> => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

export class Transcript {
  readonly entries: Entry[] = [];
  /** Pending permission prompts by request id (also in entries). */
  readonly pending = new Map<string, PermissionPrompt>();
  /** The engine's model and permission mode as last reported (system/init, status). */
  model?: string;
  permissionMode?: string;
  private nextId = 1;
  private liveText: Extract<Entry, { kind: 'text' }> | undefined;
  private liveThinking: Extract<Entry, { kind: 'thinking' }> | undefined;
  private readonly tools = new Map<string, Extract<Entry, { kind: 'tool' }>>();
  private readonly prompts = new Map<string, PermissionPrompt>();
  private lastPresenceId = 0;
  private lastPresenceOf = '';

  private add<K extends Entry['kind']>(e: Omit<Extract<Entry, { kind: K }>, 'id'> & { kind: K }): Extract<Entry, { kind: K }> {
    const entry = { ...e, id: this.nextId++ } as Extract<Entry, { kind: K }>;
    this.entries.push(entry);
    return entry;
  }

  private note(text: string, tone: 'info' | 'error' = 'info'): void {
    this.add({ kind: 'note', text, tone });
  }

  /** One presence change as a note; comings and goings of one person in a row read as one line: the latest. */
  private presence(c: PresenceChange): void {
    const text = c.action === 'role_changed' ? `${c.principal} is now ${c.role}` : `${c.principal} ${c.action} (${c.role})`;
    const last = this.entries[this.entries.length - 1];
    if (last?.kind === 'note' && last.id === this.lastPresenceId && this.lastPresenceOf === c.principal) last.text = text;
    else this.note(text);
    this.lastPresenceId = this.entries[this.entries.length - 1].id;
    this.lastPresenceOf = c.principal;
  }

  apply(item: StreamItem): void {
    if (item.kind === 'event') return this.event(item.event as unknown as Record<string, unknown>);
    const m = item.message;
    switch (m.type) {
      case 'stream_event':
        return this.streamEvent(obj(m.event));
      case 'assistant':
        return this.assistant(m);
      case 'user':
        return this.toolResults(m);
      case 'control_request':
        return this.controlRequest(m);
      case 'control_cancel_request':
        return this.withdraw(String(m.request_id));
      case 'result':
        this.liveText = this.liveThinking = undefined;
        if (m.is_error === true) this.note(`Turn ended: ${String(m.result ?? (Array.isArray(m.errors) ? m.errors.join('; ') : m.subtype))}`, 'error');
        return;
      case 'system':
        if (m.subtype === 'init') {
          if (typeof m.model === 'string') this.model = m.model;
          if (typeof m.permissionMode === 'string') this.permissionMode = m.permissionMode;
        } else if (m.subtype === 'status' && typeof m.permissionMode === 'string') {
          this.permissionMode = m.permissionMode;
        } else if (m.subtype === 'api_retry') {
          this.note(`API error, retrying (attempt ${String(m.attempt)})`, 'error');
        }
        return;
      default:
        return;
    }
  }

  private event(e: Record<string, unknown>): void {
    switch (e.subtype) {
      case 'prompt': {
        const content = obj(e.message).content;
        const blocks = Array.isArray(content) ? (content as Record<string, unknown>[]) : [];
        const text = typeof content === 'string' ? content : blocks.filter((b) => b.type === 'text').map((b) => String(b.text)).join('\n');
        this.liveText = this.liveThinking = undefined;
        this.add({ kind: 'prompt', principal: String(e.principal), text, images: blocks.filter((b) => b.type === 'image').length });
        return;
      }
      case 'presence':
        for (const c of presenceChanges(e as unknown as PresenceChange)) this.presence(c);
        return;
      case 'prompt_decided': {
        const p = this.prompts.get(String(e.request_id));
        if (p) {
          p.status = 'decided';
          p.decidedBy = String(e.decided_by);
          p.behavior = String(e.behavior);
          this.settle(p);
        }
        return;
      }
      case 'state':
        if (e.state === 'agent-lost') this.note('The agent link is down; the engine keeps running.', 'error');
        if (e.state === 'ended') this.note('Session ended.');
        return;
      case 'exited':
        this.note(`Engine exited (code ${String(e.code)}${e.signal ? `, signal ${String(e.signal)}` : ''})${e.reason ? `: ${String(e.reason)}` : ''}`, e.code === 0 ? 'info' : 'error');
        return;
      case 'engine_error':
      case 'error':
        this.note(`${String(e.code)}: ${String(e.message)}`, 'error');
        return;
      case 'gap':
        this.note(String(e.message), 'error');
        return;
      case 'policy_decision':
        this.note(`${policyLine(e.decision as 'deny' | 'ask' | 'allow', String(e.tool))} (rule ${String(e.rule)})`, e.decision === 'deny' ? 'error' : 'info');
        return;
      default:
        return;
    }
  }

  private streamEvent(ev: Record<string, unknown>): void {
    if (ev.type === 'content_block_start') {
      const block = obj(ev.content_block);
      if (block.type === 'text') this.liveText = this.add({ kind: 'text', text: '', streaming: true });
      if (block.type === 'thinking') this.liveThinking = this.add({ kind: 'thinking', text: '', streaming: true });
      return;
    }
    if (ev.type !== 'content_block_delta') return;
    const d = obj(ev.delta);
    if (d.type === 'text_delta' && typeof d.text === 'string') {
      this.liveText ??= this.add({ kind: 'text', text: '', streaming: true });
      this.liveText.text += d.text;
    } else if (d.type === 'thinking_delta' && typeof d.thinking === 'string') {
      this.liveThinking ??= this.add({ kind: 'thinking', text: '', streaming: true });
      this.liveThinking.text += d.thinking;
    }
  }

  /** One assistant frame per completed block: it replaces what streamed for that block. */
  private assistant(m: EngineMessage): void {
    const content = obj(m.message).content;
    for (const b of Array.isArray(content) ? (content as Record<string, unknown>[]) : []) {
      if (b.type === 'text') {
        const text = String(b.text ?? '');
        if (this.liveText) Object.assign(this.liveText, { text, streaming: false });
        else this.add({ kind: 'text', text, streaming: false });
        this.liveText = undefined;
      } else if (b.type === 'thinking') {
        const text = String(b.thinking ?? '');
        if (this.liveThinking) Object.assign(this.liveThinking, { text, streaming: false });
        else this.add({ kind: 'thinking', text, streaming: false });
        this.liveThinking = undefined;
      } else if (b.type === 'tool_use') {
        const id = String(b.id);
        if (!this.tools.has(id)) this.tools.set(id, this.add({ kind: 'tool', toolUseId: id, name: String(b.name), input: obj(b.input) }));
      }
    }
  }

  private toolResults(m: EngineMessage): void {
    const content = obj(m.message).content;
    for (const b of Array.isArray(content) ? (content as Record<string, unknown>[]) : []) {
      if (b.type !== 'tool_result') continue;
      const tool = this.tools.get(String(b.tool_use_id));
      if (tool) Object.assign(tool, { result: { content: b.content, isError: b.is_error === true }, awaitingPermission: false });
    }
  }

  private controlRequest(m: EngineMessage): void {
    const req = obj(m.request);
    if (req.subtype !== 'can_use_tool' || typeof m.request_id !== 'string' || this.prompts.has(m.request_id)) return;
    const prompt: PermissionPrompt = { requestId: m.request_id, toolName: String(req.tool_name ?? ''), input: obj(req.input), request: req, status: 'pending' };
    this.prompts.set(prompt.requestId, prompt);
    this.pending.set(prompt.requestId, prompt);
    const tool = this.tools.get(String(req.tool_use_id));
    if (tool) tool.awaitingPermission = true;
    this.add({ kind: 'permission', prompt });
  }

  private withdraw(requestId: string): void {
    const p = this.prompts.get(requestId);
    if (!p || p.status !== 'pending') return;
    p.status = 'withdrawn';
    this.settle(p);
  }

  /** A prompt is no longer pending: its tool card shows its diff again (and runs, or not). */
  private settle(p: PermissionPrompt): void {
    this.pending.delete(p.requestId);
    const tool = this.tools.get(String(p.request.tool_use_id));
    if (tool) tool.awaitingPermission = false;
  }
}
