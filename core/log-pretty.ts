import type { DestinationStream } from 'pino';

const LEVELS: Record<number, { label: string; color: string }> = {
  10: { label: 'TRACE', color: '90' },
  20: { label: 'DEBUG', color: '36' },
  30: { label: 'INFO ', color: '32' },
  40: { label: 'WARN ', color: '33' },
  50: { label: 'ERROR', color: '31' },
  60: { label: 'FATAL', color: '35' },
};

/** Fields every line has that the pretty form shows in its own way (or not at all). */
const SHOWN_APART = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

/**
 * One pino JSON line for people: `12:34:56.789 INFO  gateway: peer connected role=agent
 * agent=build-1`. Context fields follow as key=value (strings quoted when they hold spaces,
 * the rest as JSON). A line that is not JSON is returned unchanged.
 */
export function prettyLine(json: string, color: boolean): string {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : json + '\n';
  }
  const level = LEVELS[v.level as number] ?? { label: String(v.level).padEnd(5), color: '0' };
  const time = typeof v.time === 'number' ? new Date(v.time).toISOString().slice(11, 23) : '';
  const paint = (code: string, text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const fields = Object.entries(v)
    .filter(([k]) => !SHOWN_APART.has(k))
    .map(([k, value]) => `${paint('2', k + '=')}${typeof value === 'string' && !/[\s"=]/.test(value) ? value : JSON.stringify(value)}`);
  const name = typeof v.name === 'string' ? `${v.name}: ` : '';
  return `${paint('2', time)} ${paint(level.color, level.label)} ${name}${String(v.msg ?? '')}${fields.length ? ' ' + fields.join(' ') : ''}\n`;
}

/** A pino destination writing {@link prettyLine}s to `out` (default: stderr, coloured). */
export function prettyDestination(out: { write(text: string): unknown } = process.stderr, color = true): DestinationStream {
  return { write: (line: string) => void out.write(prettyLine(line, color)) };
}
