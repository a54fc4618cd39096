import type { LineMeta } from '../core/protocol/methods.js';
import type { TraceContext } from '../core/protocol/trace-context.js';
import type { TraceSpan, Tracer } from '../core/telemetry/tracer.js';

/** The input types a write span names (the relay writes nothing else the gateway sent). */
const INPUT_TYPES = new Set(['user', 'control_request', 'control_response', 'control_cancel_request', 'keep_alive']);
/** Tool names kept per group span, and the length of each (a name is the model's choice of a known tool; MCP names run long). */
const MAX_TOOLS = 16;
const MAX_TOOL_NAME = 128;

interface Group {
  span: TraceSpan;
  lines: number;
  bytes: number;
  lastSeq: number;
  types: Set<string>;
  tools: Set<string>;
}

/**
 * One session's spans at the agent, while tracing is on: one per write to the engine's stdin
 * (a child of the input's trace, as the gateway's `agent.input` carried it) and one per group
 * of output lines the engine wrote together (read in one turn of the event loop), a child of
 * the last traced prompt written (its turn), or of the spawn before any. The group's first line carries
 * the group's context to the gateway. Attributes: ids, seqs, sizes, kinds and tool names only.
 */
export class RelayTraces {
  /** The trace the engine's next output belongs to. */
  private turn: TraceContext | undefined;
  private group: Group | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly sessionId: string,
    /** The agent's spawn span: the parent of output before the first traced input. */
    spawn: TraceContext | undefined,
  ) {
    this.turn = spawn;
  }

  /** Starts the span of one write (input `seq`, `bytes` long); the caller ends it when the write settled. */
  write(seq: number, line: Record<string, unknown>, bytes: number, parent: TraceContext | undefined): TraceSpan {
    const type = typeof line.type === 'string' && INPUT_TYPES.has(line.type) ? line.type : 'other';
    const span = this.tracer.start(
      'tether.agent.write',
      parent,
      {
        'tether.session_id': this.sessionId,
        'tether.input.seq': seq,
        'tether.input.type': type,
        'tether.input.bytes': bytes,
        ...answerOf(line),
      },
      'producer',
    );
    // A prompt starts the output that follows (its turn); an answer or a control request has a span of its own, and the turn goes on under its prompt.
    if (parent && type === 'user') this.turn = span.context;
    return span;
  }

  /**
   * One output line (seq, size, meta, parsed value): opens the group's span at the group's first
   * line and returns its context for that line's header; later lines of the group add to it
   * and return undefined. The group ends once the event loop moves on.
   */
  line(seq: number, bytes: number, meta: LineMeta, value: Record<string, unknown> | undefined): TraceContext | undefined {
    const g = this.group;
    if (g) {
      g.lines++;
      g.bytes += bytes;
      g.lastSeq = seq;
      noteKinds(g, meta, value);
      return undefined;
    }
    const span = this.tracer.start(
      'tether.agent.output',
      this.turn,
      { 'tether.session_id': this.sessionId, 'tether.seq.first': seq },
      'producer',
    );
    const group: Group = { span, lines: 1, bytes, lastSeq: seq, types: new Set(), tools: new Set() };
    noteKinds(group, meta, value);
    this.group = group;
    setImmediate(() => this.endGroup(group));
    return span.context;
  }

  private endGroup(g: Group): void {
    if (this.group === g) this.group = undefined;
    g.span.set({
      'tether.lines': g.lines,
      'tether.bytes': g.bytes,
      'tether.seq.last': g.lastSeq,
      'tether.line.types': [...g.types].join(','),
      'tether.tools': g.tools.size ? [...g.tools].join(',') : undefined,
    });
    g.span.end();
  }
}

/** A permission answer's verdict (allow or deny), never its input or message. */
function answerOf(line: Record<string, unknown>): Record<string, string> {
  if (line.type !== 'control_response') return {};
  const behavior = (line.response as { response?: { behavior?: unknown } } | undefined)?.response?.behavior;
  return behavior === 'allow' || behavior === 'deny' ? { 'tether.answer.behavior': behavior } : {};
}

/** The line's type/subtype, and the names of the tools an assistant message calls. */
function noteKinds(g: Group, meta: LineMeta, value: Record<string, unknown> | undefined): void {
  if (meta.type) g.types.add(meta.subtype ? `${meta.type}/${meta.subtype}` : meta.type);
  if (meta.type !== 'assistant' || !value) return;
  const content = (value.message as { content?: unknown } | undefined)?.content;
  if (!Array.isArray(content)) return;
  for (const block of content) {
    const name = (block as { type?: unknown; name?: unknown }).name;
    if ((block as { type?: unknown }).type === 'tool_use' && typeof name === 'string' && g.tools.size < MAX_TOOLS)
      g.tools.add(name.slice(0, MAX_TOOL_NAME));
  }
}
