/** How each transcript entry looks. Tool calls read through client/tool-view.ts, like the terminal's. */
import { memo } from 'preact/compat';
import { useEffect, useRef } from 'preact/hooks';
import { toolResultText, viewTool, type DiffLine } from '../../tool-view.js';
import { highlightIn } from './code-highlight';
import { copyCodeOnClick, renderMarkdown } from './markdown';
import { plainToolResult } from './wording';
import type { Entry } from './transcript';

/** Tool results longer than this many characters (or lines) start folded. */
const FOLD_CHARS = 600;
const FOLD_LINES = 8;

export function Diff({ lines }: { lines: DiffLine[] }) {
  return (
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: screen readers announce the label of the preformatted diff (axe-core finds no fault here)
    <pre class="diff" aria-label="changes">
      {lines.map((l, i) => (
        <div key={i} class={l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx'}>
          {l.op} {l.text}
        </div>
      ))}
    </pre>
  );
}

export function ToolSummary({ name, input, diff = true }: { name: string; input: Record<string, unknown>; diff?: boolean }) {
  const v = viewTool(name, input);
  return (
    <>
      <div class="tool-head">
        <span class="tool-name">{v.name}</span> <code class="tool-summary">{v.summary}</code>
      </div>
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
      <summary>
        {isError ? 'Error' : 'Result'} ({text.split('\n').length} lines)
      </summary>
      {body}
    </details>
  );
}

type TextEntry = Extract<Entry, { kind: 'text' }>;

/** Finished messages' HTML: parsed once, also when the windowed list shows the entry again. */
const finishedHtml = new WeakMap<TextEntry, { text: string; html: string }>();

function markdownHtml(e: TextEntry): string {
  if (e.streaming) return renderMarkdown(e.text);
  const hit = finishedHtml.get(e);
  if (hit?.text === e.text) return hit.html;
  const html = renderMarkdown(e.text);
  finishedHtml.set(e, { text: e.text, html });
  return html;
}

/** Assistant text as markdown; its code is highlighted once the message is finished (not per delta). */
function AssistantText({ e }: { e: TextEntry }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!e.streaming && ref.current) highlightIn(ref.current);
  }, [e.text, e.streaming]);
  return (
    // biome-ignore lint/a11y/useKeyWithClickEvents lint/a11y/noStaticElementInteractions: one listener for the Copy buttons inside (real buttons, keyboard-reachable): the markdown is HTML, not components
    <div
      ref={ref}
      class={e.streaming ? 'md streaming' : 'md'}
      data-testid="assistant-text"
      onClick={(ev) => copyCodeOnClick(ev)}
      dangerouslySetInnerHTML={{ __html: markdownHtml(e) }}
    />
  );
}

/**
 * What of an entry shows, at this render: the transcript changes entries in place, so this is
 * how an unchanged entry is told apart and skipped (only the streaming message re-renders).
 */
export function entrySig(e: Entry): readonly unknown[] {
  switch (e.kind) {
    case 'prompt':
      return [e.queued, e.text, e.withdrawing];
    case 'text':
    case 'thinking':
      return [e.text, e.streaming];
    case 'tool':
      return [e.result, e.awaitingPermission];
    case 'note':
      return [e.text, e.tone];
    default:
      return [];
  }
}

const sameSig = (a: readonly unknown[], b: readonly unknown[]) => a.length === b.length && a.every((v, i) => v === b[i]);

/** An entry that re-renders only when what it shows changed. */
export const MemoEntry = memo(
  ({ e }: { e: Entry; sig: readonly unknown[] }) => <EntryView e={e} />,
  (a, b) => a.e === b.e && sameSig(a.sig, b.sig),
);

export function EntryView({ e }: { e: Entry }) {
  switch (e.kind) {
    case 'prompt':
      return (
        <div class={e.queued ? 'prompt queued' : 'prompt'} data-testid="prompt">
          <span class="sender">{e.principal}</span>
          {e.queued && (
            <span class="muted small" data-testid="queued">
              {' '}
              {e.withdrawing
                ? `queued: being withdrawn by ${e.withdrawing}`
                : e.priority === 'now'
                  ? 'queued: steers the running turn'
                  : 'queued: the engine reads it when the current answer ends'}
            </span>
          )}
          <div class="prompt-text">
            {e.text}
            {e.images > 0 && (
              <span class="muted">
                {' '}
                [{e.images} image{e.images > 1 ? 's' : ''}]
              </span>
            )}
          </div>
        </div>
      );
    case 'text':
      return <AssistantText e={e} />;
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
          {e.result ? (
            <ToolResult content={e.result.content} isError={e.result.isError} />
          ) : (
            <div class="muted small">{e.awaitingPermission ? 'waiting for permission (below)' : 'running…'}</div>
          )}
        </div>
      );
    case 'note':
      return (
        <div class={`note ${e.tone}`} data-testid={e.tone === 'meta' ? 'turn-summary' : 'note'}>
          {e.text}
        </div>
      );
    default:
      return null;
  }
}
