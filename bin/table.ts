/** Left-aligned columns, two spaces apart, a header row first. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => rows.reduce((w, r) => Math.max(w, r[i].length), h.length)); // no spread: rows may be many
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd() + '\n';
  return line(head) + rows.map(line).join('');
}
