/** How each transcript entry looks. Tool calls read through client/tool-view.ts, like the terminal's. */
import { toolResultText, viewTool, type DiffLine } from '../../../client/tool-view.js';
import { copyCodeOnClick, renderMarkdown } from './markdown';
import { plainToolResult } from './wording';
import type { Entry } from './transcript';

/** Tool results longer than this many characters (or lines) start folded. */
const FOLD_CHARS = 600;
const FOLD_LINES = 8;

export function Diff({ lines }: { lines: DiffLine[] }) {
  return (
    <pre class="diff" aria-label="changes">
      {lines.map((l, i) => (
        <div key={i} class={l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx'}>{l.op} {l.text}</div>
      ))}
    </pre>
  );
}

export function ToolSummary({ name, input, diff = true }: { name: string; input: Record<string, unknown>; diff?: boolean }) {
  const v = viewTool(name, input);
  return (
    <>
      <div class="tool-head"><span class="tool-name">{v.name}</span> <code class="tool-summary">{v.summary}</code></div>
      {diff && v.diff && v.diff.length > 0 && <Diff lines={v.diff} />}
    </>
  );
}

function ToolResult({ content, isError }: { content: unknown; isError: boolean }) {
  const text = plainToolResult(toolResultText(content));
  const long = text.length > FOLD_CHARS || text.split('\n').length > FOLD_LINES;
  const body = <pre class={isError ? 'result error' : 'result'}>{text || '(no output)'}</pre>;
  if (!long) return body;
  return (
    <details class="fold">
      <summary>{isError ? 'Error' : 'Result'} ({text.split('\n').length} lines)</summary>
      {body}
    </details>
  );
}

export function EntryView({ e }: { e: Entry }) {
  switch (e.kind) {
    case 'prompt':
      return (
        <div class={e.queued ? 'prompt queued' : 'prompt'} data-testid="prompt">
          <span class="sender">{e.principal}</span>
          {e.queued && <span class="muted small" data-testid="queued"> queued: the engine reads it when the current answer ends</span>}
          <div class="prompt-text">{e.text}{e.images > 0 && <span class="muted"> [{e.images} image{e.images > 1 ? 's' : ''}]</span>}</div>
        </div>
      );
    case 'text':
      return <div class={e.streaming ? 'md streaming' : 'md'} data-testid="assistant-text" onClick={(ev) => copyCodeOnClick(ev)} dangerouslySetInnerHTML={{ __html: renderMarkdown(e.text) }} />;
    case 'thinking':
      return (
        <details class="thinking">
          <summary>Thinking{e.streaming ? '…' : ''}</summary>
          <p>{e.text}</p>
        </details>
      );
    case 'tool':
      return (
        <div class="tool card" data-testid="tool-card" data-tool={e.name}>
          <ToolSummary name={e.name} input={e.input} diff={!e.awaitingPermission} />
          {e.result ? <ToolResult content={e.result.content} isError={e.result.isError} /> : <div class="muted small">{e.awaitingPermission ? 'waiting for permission (below)' : 'running…'}</div>}
        </div>
      );
    case 'note':
      return <div class={`note ${e.tone}`} data-testid={e.tone === 'meta' ? 'turn-summary' : 'note'}>{e.text}</div>;
    default:
      return null;
  }
}
