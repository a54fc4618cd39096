/**
 * Reads the engine's stream-json output as ACP `session/update` payloads: text and thinking
 * deltas as message/thought chunks (the completed `assistant` block only when nothing of it
 * was streamed), `tool_use` blocks as tool calls, `tool_result` blocks as their final
 * status, TodoWrite as a plan. One instance per ACP session: it remembers what it streamed.
 */
import type * as acp from '@agentclientprotocol/sdk';
import { viewTool } from '../tool-view.js';

type Block = Record<string, unknown>;

const KINDS: Record<string, acp.ToolKind> = {
  Bash: 'execute',
  BashOutput: 'execute',
  KillShell: 'execute',
  Read: 'read',
  NotebookRead: 'read',
  LS: 'read',
  Write: 'edit',
  Edit: 'edit',
  MultiEdit: 'edit',
  NotebookEdit: 'edit',
  Glob: 'search',
  Grep: 'search',
  WebSearch: 'search',
  WebFetch: 'fetch',
  TodoWrite: 'think',
  Task: 'think',
  ExitPlanMode: 'switch_mode',
};

/** The ACP kind of an engine tool (`other` for tools we do not know). */
export function toolKind(name: string): acp.ToolKind {
  return KINDS[name] ?? 'other';
}

/** A one-line title for a tool call: the tool and what it acts on. */
export function toolTitle(name: string, input: Record<string, unknown> | undefined): string {
  const view = viewTool(name, input);
  const summary = view.summary.length > 200 ? view.summary.slice(0, 199) + '…' : view.summary;
  return summary ? `${name}: ${summary}` : name;
}

/** The locations a tool call touches, for editors that follow along. */
function locations(input: Record<string, unknown> | undefined): acp.ToolCallLocation[] | undefined {
  const path = viewTool('', input).path ?? (typeof input?.file_path === 'string' ? input.file_path : undefined);
  return path ? [{ path }] : undefined;
}

const text = (t: string): acp.ContentBlock => ({ type: 'text', text: t });

/** A tool_result's content as text (string, or text blocks). */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((c: Block) => (c?.type === 'text' ? String(c.text ?? '') : '')).join('');
  return content === undefined ? '' : JSON.stringify(content);
}

const PLAN_STATUS: Record<string, acp.PlanEntryStatus> = { pending: 'pending', in_progress: 'in_progress', completed: 'completed' };

/** TodoWrite's input as ACP plan entries (ACP replaces the whole plan with each update). */
export function planEntries(input: Record<string, unknown> | undefined): acp.PlanEntry[] | undefined {
  const todos = input?.todos;
  if (!Array.isArray(todos)) return undefined;
  return todos.map((t: Block) => ({
    content: String(t.content ?? ''),
    priority: 'medium',
    status: PLAN_STATUS[String(t.status)] ?? 'pending',
  }));
}

export class EngineUpdates {
  /** Text (or thinking) deltas seen since the last completed block of that kind. */
  private streamedText = false;
  private streamedThinking = false;
  /** Tool calls announced, so a permission prompt can refer to one already shown. */
  readonly announced = new Set<string>();

  /** The updates one engine message stands for (often none). */
  read(m: Record<string, unknown>): acp.SessionUpdate[] {
    switch (m.type) {
      case 'stream_event':
        return this.streamEvent(m.event as Block | undefined);
      case 'assistant':
        return this.assistant(m);
      case 'user':
        return this.toolResults(m);
      default:
        return [];
    }
  }

  private streamEvent(e: Block | undefined): acp.SessionUpdate[] {
    if (e?.type !== 'content_block_delta') return [];
    const delta = e.delta as Block | undefined;
    if (delta?.type === 'text_delta' && typeof delta.text === 'string' && delta.text) {
      this.streamedText = true;
      return [{ sessionUpdate: 'agent_message_chunk', content: text(delta.text) }];
    }
    if (delta?.type === 'thinking_delta' && typeof delta.thinking === 'string' && delta.thinking) {
      this.streamedThinking = true;
      return [{ sessionUpdate: 'agent_thought_chunk', content: text(delta.thinking) }];
    }
    return [];
  }

  private assistant(m: Block): acp.SessionUpdate[] {
    // Subagents' messages (parent_tool_use_id set) are the subagent's own: not the editor's transcript.
    if (typeof m.parent_tool_use_id === 'string') return [];
    const out: acp.SessionUpdate[] = [];
    for (const b of ((m.message as Block | undefined)?.content as Block[] | undefined) ?? []) {
      if (b.type === 'text') {
        if (!this.streamedText && typeof b.text === 'string' && b.text)
          out.push({ sessionUpdate: 'agent_message_chunk', content: text(b.text) });
        this.streamedText = false;
      } else if (b.type === 'thinking') {
        if (!this.streamedThinking && typeof b.thinking === 'string' && b.thinking)
          out.push({ sessionUpdate: 'agent_thought_chunk', content: text(b.thinking) });
        this.streamedThinking = false;
      } else if (b.type === 'tool_use' && typeof b.id === 'string') {
        out.push(...this.toolUse(b.id, String(b.name ?? ''), b.input as Record<string, unknown> | undefined));
      }
    }
    return out;
  }

  private toolUse(id: string, name: string, input: Record<string, unknown> | undefined): acp.SessionUpdate[] {
    this.announced.add(id);
    const out: acp.SessionUpdate[] = [
      {
        sessionUpdate: 'tool_call',
        toolCallId: id,
        title: toolTitle(name, input),
        kind: toolKind(name),
        status: 'pending',
        rawInput: input,
        locations: locations(input),
      },
    ];
    const plan = name === 'TodoWrite' ? planEntries(input) : undefined;
    if (plan) out.push({ sessionUpdate: 'plan', entries: plan });
    return out;
  }

  private toolResults(m: Block): acp.SessionUpdate[] {
    const content = (m.message as Block | undefined)?.content;
    if (!Array.isArray(content)) return [];
    const out: acp.SessionUpdate[] = [];
    for (const b of content as Block[]) {
      if (b.type !== 'tool_result' || typeof b.tool_use_id !== 'string') continue;
      const body = resultText(b.content);
      out.push({
        sessionUpdate: 'tool_call_update',
        toolCallId: b.tool_use_id,
        status: b.is_error === true ? 'failed' : 'completed',
        content: body ? [{ type: 'content', content: text(body) }] : undefined,
        rawOutput: b.content,
      });
    }
    return out;
  }
}
