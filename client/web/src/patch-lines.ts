import type { DiffLine } from '../../tool-view.js';

/**
 * A unified diff (git's text) as the lines the Edit cards' Diff shows: added, removed, kept;
 * the file and hunk headers as kept lines, so the reader sees where each hunk starts.
 */
export function patchLines(patch: string): DiffLine[] {
  const lines = patch.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.map((l): DiffLine => {
    if (l.startsWith('+') && !l.startsWith('+++ ')) return { op: '+', text: l.slice(1) };
    if (l.startsWith('-') && !l.startsWith('--- ')) return { op: '-', text: l.slice(1) };
    return { op: ' ', text: l.startsWith(' ') ? l.slice(1) : l };
  });
}
