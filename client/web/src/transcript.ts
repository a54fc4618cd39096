/**
 * A session's stream turned into what the page shows: prompts with their sender, assistant
 * text (streamed, then final), thinking, tool calls with their results, permission prompts
 * with their fate, and notes (presence, roles, state, errors). Pure: no DOM, no network.
 */
import type { EngineMessage, StreamItem } from './frames.js';
import { grantedRules, ruleLabel } from '../../permission-policy.js';
import { policyLine } from '../../tool-view.js';
import type { PresenceChange, QueueChange, QueuedPrompt } from '../../../core/protocol/events.js';
import { queueChangeText, stopText } from '../../queue-view.js';
import { engineNoticeText, grantedForText } from '../../turn-view.js';
import { worktreeText } from '../../worktree-view.js';
import type { WorktreeInfo } from '../../../core/protocol/worktree.js';
import type { TurnAttribution } from '../../../core/protocol/turn-approval.js';
import { presenceChanges } from '../../../core/protocol/presence.js';
import { apiRetryNote, compactNote, exitNote, gapNote, turnEndNote, turnSummary } from './wording.js';

export interface PermissionPrompt {
  requestId: string;
  toolName: string;
  input: Record<string, unknown>;
  /** The engine's whole can_use_tool request (suggestions, description, …). */
  request: Record<string, unknown>;
  status: 'pending' | 'decided' | 'withdrawn';
  decidedBy?: string;
  behavior?: string;
  /** This page answered it too, and its answer came after the one that counted (or after the withdrawal). */
  lateAnswer?: boolean;
  /** Whose turn the call comes from and who may answer (the gateway's `prompt_turn`, sent just before the prompt). */
  turn?: TurnAttribution;
  /** The standing rule that answered it, when no person did. */
  rule?: string;
}

export type Entry =
  | {
      id: number;
      kind: 'prompt';
      principal: string;
      text: string;
      images: number;
      queued?: boolean;
      uuid?: string;
      priority?: string;
      withdrawing?: string;
    }
  | { id: number; kind: 'text'; text: string; streaming: boolean }
  | { id: number; kind: 'thinking'; text: string; streaming: boolean }
  | {
      id: number;
      kind: 'tool';
      toolUseId: string;
      name: string;
      input: Record<string, unknown>;
      result?: { content: unknown; isError: boolean };
      awaitingPermission?: boolean;
    }
  | { id: number; kind: 'permission'; prompt: PermissionPrompt }
  | { id: number; kind: 'note'; text: string; tone: 'info' | 'error' | 'meta' };

const obj = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

export class Transcript {
  readonly entries: Entry[] = [];
  /** Pending permission prompts by request id (also in entries). */
  readonly pending = new Map<string, PermissionPrompt>();
  /** Rules a member allowed for the rest of the session, oldest first, with who granted them. */
  readonly standingRules: { rule: string; grantedBy: string; grantedFor: string }[] = [];
  /** `prompt_turn` events by request id, until their prompt arrives (bounded: a prompt follows its event at once). */
  private readonly turnOfPrompt = new Map<string, TurnAttribution>();
  /** The engine's model and permission mode as last reported (system/init, status). */
  model?: string;
  permissionMode?: string;
  private nextId = 1;
  /** Streaming text and thinking blocks by `messageId:index`: deltas land in the block they belong to, whatever came between. */
  private readonly streams = new Map<string, Extract<Entry, { kind: 'text' | 'thinking' }>>();
  /** The API message the engine streams now (its stream events name it; message_start at least). */
  private streamingMessage = '';
  /** Finished blocks per API message: the engine writes one assistant frame per block, in index order. */
  private readonly blocksDone = new Map<string, number>();
  /** Prompts sent while a turn runs, in the order they will run (the gateway's `queued` events): shown below the transcript until they start. */
  readonly queued: Extract<Entry, { kind: 'prompt' }>[] = [];
  /** A turn runs: from a prompt taken (or system/init) to its result. */
  private turnRunning = false;
  /** The engine's cost so far (its results carry a running total per process). */
  private costSoFar = 0;
  /** Who interrupted the running turn (said when it ends). */
  private interruptedBy: string | undefined;
  private readonly tools = new Map<string, Extract<Entry, { kind: 'tool' }>>();
  /** Every permission prompt seen, by request id. */
  readonly prompts = new Map<string, PermissionPrompt>();
  private lastPresenceId = 0;
  private lastPresenceOf = '';
  /** The latest thing worth saying aloud (a turn's end, a permission request, the session's end); `count` grows with each. */
  announcement = { count: 0, text: '' };

  private say(text: string): void {
    this.announcement = { count: this.announcement.count + 1, text };
  }

  private add<K extends Entry['kind']>(e: Omit<Extract<Entry, { kind: K }>, 'id'> & { kind: K }): Extract<Entry, { kind: K }> {
    const entry = { ...e, id: this.nextId++ } as Extract<Entry, { kind: K }>;
    this.entries.push(entry);
    return entry;
  }

  private note(text: string, tone: 'info' | 'error' | 'meta' = 'info'): void {
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
        return this.streamEvent(m, obj(m.event));
      case 'assistant':
        return this.assistant(m);
      case 'user':
        return this.toolResults(m);
      case 'control_request':
        return this.controlRequest(m);
      case 'control_cancel_request':
        return this.withdraw(String(m.request_id));
      case 'result': {
        this.endTurn();
        const note = m.is_error === true ? turnEndNote(m, this.interruptedBy) : undefined;
        if (note) this.note(note.text, note.tone);
        this.say(note?.text ?? 'Answer finished.');
        this.interruptedBy = undefined;
        const cost = typeof m.total_cost_usd === 'number' ? m.total_cost_usd : undefined;
        this.note(turnSummary(m, cost === undefined ? undefined : cost - this.costSoFar), 'meta');
        if (cost !== undefined) this.costSoFar = cost;
        return;
      }
      case 'system':
        if (m.subtype === 'init') {
          this.startTurn();
          if (typeof m.model === 'string') this.model = m.model;
          if (typeof m.permissionMode === 'string') this.permissionMode = m.permissionMode;
        } else if (m.subtype === 'status' && typeof m.permissionMode === 'string') {
          this.permissionMode = m.permissionMode;
        } else if (m.subtype === 'api_retry') {
          this.note(apiRetryNote(m), 'error');
        } else if (m.subtype === 'compact_boundary') {
          this.note(compactNote(m));
        } else if (engineNoticeText(m)) {
          this.note(engineNoticeText(m)!, 'error');
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
        const text =
          typeof content === 'string'
            ? content
            : blocks
                .filter((b) => b.type === 'text')
                .map((b) => String(b.text))
                .join('\n');
        const prompt = {
          id: this.nextId++,
          kind: 'prompt' as const,
          principal: String(e.principal),
          text,
          images: blocks.filter((b) => b.type === 'image').length,
        };
        // The gateway says whether it waits in the queue; its `queued` event places it.
        if (e.queued === true) this.queued.push({ ...prompt, queued: true, uuid: String(e.uuid), priority: String(e.priority ?? 'later') });
        else {
          this.entries.push(prompt);
          this.turnRunning = true;
        }
        return;
      }
      case 'queued': {
        const change = e.change as QueueChange;
        const now = e.prompts as QueuedPrompt[];
        if (change.action === 'started') {
          const note = queueChangeText(change);
          if (note && (change.steer || change.folded)) this.note(note);
          for (const p of this.takeQueued(change.uuids)) this.entries.push({ ...p, queued: false, withdrawing: undefined });
        } else if (change.action === 'withdrawn' || change.action === 'cleared') {
          this.takeQueued(change.uuids);
          if (change.action === 'withdrawn') this.note(queueChangeText(change)!);
        }
        for (const p of this.queued) p.withdrawing = now.find((q) => q.uuid === p.uuid)?.withdrawing;
        // Order as the gateway says (a `now` or `next` goes ahead of `later` ones).
        this.queued.sort((a, b) => now.findIndex((q) => q.uuid === a.uuid) - now.findIndex((q) => q.uuid === b.uuid));
        return;
      }
      case 'worktree':
        this.note(`${worktreeText(e.worktree as WorktreeInfo)}.`);
        return;
      case 'presence':
        for (const c of presenceChanges(e as unknown as PresenceChange)) this.presence(c);
        return;
      case 'prompt_decided': {
        const p = this.prompts.get(String(e.request_id));
        if (p) {
          p.status = 'decided';
          p.decidedBy = String(e.decided_by);
          p.behavior = String(e.behavior);
          if (typeof e.rule === 'string') p.rule = e.rule;
          this.settle(p);
        }
        for (const r of grantedRules(e.updated_permissions)) {
          const rule = ruleLabel(r);
          if (!this.standingRules.some((s) => s.rule === rule))
            this.standingRules.push({
              rule,
              grantedBy: String(e.decided_by),
              grantedFor: grantedForText(e.granted_for, String(e.decided_by)),
            });
        }
        return;
      }
      case 'prompt_turn':
        if (this.turnOfPrompt.size >= 64) this.turnOfPrompt.delete(this.turnOfPrompt.keys().next().value as string);
        this.turnOfPrompt.set(String(e.request_id), {
          turn_authors: e.turn_authors as string[],
          approval: e.approval as TurnAttribution['approval'],
        });
        return;
      case 'state':
        if (e.state === 'ended' && this.queued.length)
          this.note(`${this.queued.splice(0).length} queued prompt(s) never ran: the session ended.`);
        if (e.state === 'agent-lost') this.note('The build machine is out of reach for now; the engine keeps running there.', 'error');
        return;
      case 'exited': {
        const note = exitNote(
          typeof e.code === 'number' ? e.code : null,
          typeof e.signal === 'string' ? e.signal : null,
          typeof e.reason === 'string' ? e.reason : undefined,
        );
        this.note(note.text, note.tone);
        this.say(note.text);
        return;
      }
      case 'engine_resumed':
        if (e.interrupted_turn) this.endTurn(); // its result never comes
        this.note(
          `The build machine's agent restarted; the engine picked the conversation up again after ${Math.round(Number(e.gap_ms) / 1000)} s.${e.interrupted_turn ? ' The turn that was running was cut short.' : ''}`,
          e.interrupted_turn ? 'error' : 'info',
        );
        return;
      case 'owner_changed':
        this.note(`${String(e.previous_owner)} handed the session to ${String(e.owner)}.`, 'info');
        return;
      case 'title_changed':
        this.note(`${String(e.by)} named the session “${String(e.title)}”.`, 'info');
        return;
      case 'interrupt':
        if (typeof e.cleared === 'number') this.note(`${stopText(String(e.principal), e.cleared)}.`);
        else if (this.turnRunning) this.interruptedBy = String(e.principal); // named on the turn's end; an idle interrupt changes nothing
        return;
      case 'budget':
        // Whose budget, so a shared session reads it right; "reached": their next prompt is refused.
        this.note(`${String(e.principal)}: ${String(e.message)}`, e.state === 'reached' ? 'error' : 'info');
        return;
      case 'engine_error':
        this.note(`The engine wrote something unreadable; it was skipped (${String(e.message)}).`, 'error');
        return;
      case 'error':
        this.note(String(e.message), 'error');
        return;
      case 'gap':
        this.note(gapNote(Number(e.from_seq), Number(e.to_seq)), 'error');
        return;
      case 'policy_decision':
        this.note(
          `${policyLine(e.decision as 'deny' | 'ask' | 'allow', String(e.tool))} (rule ${String(e.rule)})`,
          e.decision === 'deny' ? 'error' : 'info',
        );
        return;
      default:
        return;
    }
  }

  /** A turn starts (system/init). */
  private startTurn(): void {
    this.turnRunning = true;
  }

  /** A turn ended: whatever still streams is over. */
  private endTurn(): void {
    for (const e of this.streams.values()) e.streaming = false;
    this.streams.clear();
    this.turnRunning = false;
  }

  /** Takes the queued prompts with these uuids off the queue, in queue order. */
  private takeQueued(uuids: string[]): Extract<Entry, { kind: 'prompt' }>[] {
    const taken = this.queued.filter((p) => p.uuid !== undefined && uuids.includes(p.uuid));
    for (const p of taken) this.queued.splice(this.queued.indexOf(p), 1);
    return taken;
  }

  private streamEvent(m: EngineMessage, ev: Record<string, unknown>): void {
    if (ev.type === 'message_start') this.streamingMessage = String(obj(ev.message).id ?? m.api_message_id ?? '');
    else if (typeof m.api_message_id === 'string') this.streamingMessage = m.api_message_id;
    const key = `${this.streamingMessage}:${String(ev.index ?? 0)}`;
    if (ev.type === 'content_block_start') {
      const block = obj(ev.content_block);
      if (block.type === 'text' || block.type === 'thinking')
        this.streams.set(key, this.add({ kind: block.type, text: '', streaming: true }));
      return;
    }
    if (ev.type !== 'content_block_delta') return;
    const d = obj(ev.delta);
    const kind = d.type === 'text_delta' ? 'text' : d.type === 'thinking_delta' ? 'thinking' : undefined;
    const piece = kind === 'text' ? d.text : d.thinking;
    if (!kind || typeof piece !== 'string') return;
    let entry = this.streams.get(key);
    if (!entry || entry.kind !== kind) this.streams.set(key, (entry = this.add({ kind, text: '', streaming: true })));
    entry.text += piece;
  }

  /** One assistant frame per completed block: it replaces what streamed for that block (same message id, same index). */
  private assistant(m: EngineMessage): void {
    const message = obj(m.message);
    const id = String(message.id ?? '');
    const content = message.content;
    for (const b of Array.isArray(content) ? (content as Record<string, unknown>[]) : []) {
      const index = this.blocksDone.get(id) ?? 0;
      this.blocksDone.set(id, index + 1);
      const key = `${id}:${index}`;
      if (b.type === 'text' || b.type === 'thinking') {
        const text = String((b.type === 'text' ? b.text : b.thinking) ?? '');
        // By index; an interrupted message's aborted frame may skip blocks, so else the first of its kind still streaming.
        const at =
          this.streams.get(key)?.kind === b.type
            ? key
            : [...this.streams.keys()].find((k) => k.startsWith(`${id}:`) && this.streams.get(k)!.kind === b.type);
        const streamed = at === undefined ? undefined : this.streams.get(at);
        if (at !== undefined) this.streams.delete(at);
        if (streamed) Object.assign(streamed, { text, streaming: false });
        else this.add({ kind: b.type, text, streaming: false });
      } else if (b.type === 'tool_use') {
        const toolId = String(b.id);
        if (!this.tools.has(toolId))
          this.tools.set(toolId, this.add({ kind: 'tool', toolUseId: toolId, name: String(b.name), input: obj(b.input) }));
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
    const turn = this.turnOfPrompt.get(m.request_id);
    this.turnOfPrompt.delete(m.request_id);
    const prompt: PermissionPrompt = {
      requestId: m.request_id,
      toolName: String(req.tool_name ?? ''),
      input: obj(req.input),
      request: req,
      status: 'pending',
      ...(turn ? { turn } : {}),
    };
    this.prompts.set(prompt.requestId, prompt);
    this.pending.set(prompt.requestId, prompt);
    const tool = this.tools.get(String(req.tool_use_id));
    if (tool) tool.awaitingPermission = true;
    this.add({ kind: 'permission', prompt });
    this.say(prompt.toolName === 'AskUserQuestion' ? 'The model asks a question.' : `Permission needed: ${prompt.toolName}.`);
  }

  private withdraw(requestId: string): void {
    const p = this.prompts.get(requestId);
    if (p?.status !== 'pending') return;
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
