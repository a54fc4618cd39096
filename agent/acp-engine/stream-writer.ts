import type * as acp from '@agentclientprotocol/sdk';
import { assistant, newMessageId, result, streamEvent, system, toolResult, type EngineState, type Frame } from '../demo-engine/frames.js';
import { namedToolCall, planTodos, toolResultText, type NamedToolCall } from './tool-calls.js';

/** What one turn ended with, as the engine's `result` says it. */
export interface TurnEnd {
  stopReason: acp.StopReason | 'error';
  /** A failed session/prompt's message. */
  error?: string;
  durationMs: number;
  resultIndex: number;
  queued: number;
  userMessageUuids: string[];
}

interface OpenText {
  kind: 'text' | 'thinking';
  messageId: string;
  text: string;
}

interface KnownCall {
  call: Partial<acp.ToolCall>;
  shown: boolean;
  finished: boolean;
}

/**
 * Turns one ACP session's `session/update` notifications into the engine lines the gateway
 * carries (docs/engine-protocol.md): message chunks into one assistant text (or thinking)
 * message each, with stream events when partial messages were asked for; tool calls into a
 * tool_use (its name by kind, tool-calls.ts) and, once finished, a tool_result; a plan into
 * a TodoWrite; mode changes into a status line. One writer per engine process; not reentrant.
 */
export class StreamWriter {
  private open: OpenText | undefined;
  private readonly calls = new Map<string, KnownCall>();
  private lastText = '';

  constructor(
    private readonly state: EngineState,
    private readonly emit: (frame: Frame) => void,
  ) {}

  /** Applies one update, in arrival order. */
  update(u: acp.SessionUpdate): void {
    switch (u.sessionUpdate) {
      case 'agent_message_chunk':
      case 'agent_thought_chunk':
        if (u.content.type === 'text') this.chunk(u.sessionUpdate === 'agent_message_chunk' ? 'text' : 'thinking', u.content.text);
        return;
      case 'tool_call':
        return this.noteCall(u.toolCallId, u);
      case 'tool_call_update':
        return this.noteCall(u.toolCallId, u);
      case 'plan': {
        this.flushText();
        const id = `plan_${newMessageId()}`;
        this.emit(assistant(this.state, newMessageId(), { type: 'tool_use', id, name: 'TodoWrite', input: planTodos(u) }));
        this.emit(toolResult(this.state, id, 'Plan updated', undefined, planTodos(u), {}));
        return;
      }
      case 'current_mode_update':
        this.state.permissionMode = u.currentModeId;
        this.emit(system(this.state, 'status', { status: null, permissionMode: u.currentModeId }));
        return;
      default:
      // Commands, usage, config options and session info have no line of their own in the engine stream.
    }
  }

  /** The tool call's latest state; `undefined` for an id the engine never announced. */
  call(id: string): Partial<acp.ToolCall> | undefined {
    return this.calls.get(id)?.call;
  }

  /**
   * Shows a tool call's tool_use now (before a permission prompt about it, or once it runs):
   * the engine may announce a call before its input is known and fill it in later.
   */
  show(id: string, fallback?: Partial<acp.ToolCall>): NamedToolCall {
    let known = this.calls.get(id);
    if (!known) {
      known = { call: { ...fallback, toolCallId: id }, shown: false, finished: false };
      this.calls.set(id, known);
    }
    const named = namedToolCall(known.call);
    if (!known.shown) {
      this.flushText();
      known.shown = true;
      this.emit(assistant(this.state, newMessageId(), { type: 'tool_use', id, name: named.name, input: named.input }));
    }
    return named;
  }

  /** Ends the turn: what is open is written, calls never finished are shown, then the `result`. */
  end(t: TurnEnd): void {
    this.flushText();
    for (const [id, known] of this.calls) if (!known.shown) this.show(id);
    this.calls.clear();
    const ok = t.stopReason === 'end_turn';
    const cancelled = t.stopReason === 'cancelled';
    this.emit(
      result(this.state, {
        isError: !ok,
        subtype: ok ? 'success' : 'error_during_execution',
        terminalReason: ok ? 'completed' : cancelled ? 'aborted_streaming' : t.stopReason,
        stopReason: ok ? 'end_turn' : null,
        text: ok ? this.lastText : t.error,
        numTurns: 1,
        denials: [],
        inputTokens: 0,
        outputTokens: 0,
        durationMs: t.durationMs,
        resultIndex: t.resultIndex,
        queued: t.queued,
        userMessageUuids: t.userMessageUuids,
      }),
    );
    this.lastText = '';
  }

  private chunk(kind: 'text' | 'thinking', text: string): void {
    if (this.open && this.open.kind !== kind) this.flushText();
    if (!this.open) {
      this.open = { kind, messageId: newMessageId(), text: '' };
      if (this.state.partial) {
        const block = kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '' };
        this.emit(
          streamEvent(this.state, this.open.messageId, {
            type: 'message_start',
            message: { id: this.open.messageId, role: 'assistant', model: this.state.model, content: [] },
          }),
        );
        this.emit(streamEvent(this.state, this.open.messageId, { type: 'content_block_start', index: 0, content_block: block }));
      }
    }
    this.open.text += text;
    if (this.state.partial && text !== '') {
      const delta = kind === 'text' ? { type: 'text_delta', text } : { type: 'thinking_delta', thinking: text };
      this.emit(streamEvent(this.state, this.open.messageId, { type: 'content_block_delta', index: 0, delta }));
    }
  }

  private flushText(): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    if (this.state.partial) {
      this.emit(streamEvent(this.state, open.messageId, { type: 'content_block_stop', index: 0 }));
      this.emit(
        streamEvent(this.state, open.messageId, { type: 'message_delta', delta: { stop_reason: null, stop_sequence: null }, usage: {} }),
      );
      this.emit(streamEvent(this.state, open.messageId, { type: 'message_stop' }));
    }
    if (open.text === '') return;
    if (open.kind === 'text') this.lastText = open.text;
    const block = open.kind === 'text' ? { type: 'text', text: open.text } : { type: 'thinking', thinking: open.text, signature: '' };
    this.emit(assistant(this.state, open.messageId, block));
  }

  /** Learns a tool call's latest state (an update, or the call a permission request names); shown once it runs. */
  noteCall(id: string, u: Partial<acp.ToolCall> | acp.ToolCallUpdate): void {
    const known = this.calls.get(id);
    const merged: Partial<acp.ToolCall> = { ...known?.call };
    for (const [k, v] of Object.entries(u))
      if (v !== undefined && v !== null && k !== 'sessionUpdate') (merged as Record<string, unknown>)[k] = v;
    if (known) known.call = merged;
    else this.calls.set(id, { call: merged, shown: false, finished: false });
    const status = merged.status ?? 'pending';
    if (status === 'pending') return; // its input may still come: shown when asked about or when it runs
    this.show(id);
    const entry = this.calls.get(id)!;
    if ((status === 'completed' || status === 'failed') && !entry.finished) {
      entry.finished = true;
      const failed = status === 'failed';
      this.emit(toolResult(this.state, id, toolResultText(merged), failed ? true : undefined, { status, acp_kind: merged.kind }, {}));
    }
  }
}
