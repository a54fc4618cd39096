import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Answers a socket the HTTP server never turned into a request and response (an upgrade
 * refused at the door or on its path, a connection refused at a cap) with a bare HTTP/1.1
 * answer, then ends it: the status line, `Connection: close`, `headers`, and a plain-text
 * `body` (keep it to one line) with its length.
 */
export function endWithHttp(socket: Duplex, status: number, body = '', headers: Record<string, string> = {}): void {
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Connection: close',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  if (body) lines.push('Content-Type: text/plain; charset=utf-8');
  lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}
