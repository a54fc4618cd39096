import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { WsFrameReader } from './ws-frames.js';

/** One WebSocket data message seen on the wire. */
export interface WireMessage {
  /** `up`: toward the gateway; `down`: from it. */
  dir: 'up' | 'down';
  kind: 'text' | 'binary';
  /**
   * What it is: the JSON-RPC method (a binary frame's header method), `response` for an
   * answer, or `?` when the start of the message does not say.
   */
  what: string;
  /** Its first bytes as text (a binary frame: its header), up to HEAD_BYTES. */
  head: string;
}

/**
 * A TCP proxy in front of a gateway's WebSocket port that counts the WebSocket data messages
 * (text and binary) crossing it in each direction, as they are on the socket (read by
 * {@link WsFrameReader}); control frames (ping, pong, close) are left out.
 */
export interface WsMessageCounter {
  /** ws:// URL of the proxy (same path as the target's). */
  url: string;
  /** Every data message since the last reset, in the order each direction saw them. */
  readonly messages: WireMessage[];
  reset(): void;
  close(): Promise<void>;
}

/** How many bytes of a message's payload are looked at to classify it. */
const HEAD_BYTES = 512;

export async function startWsMessageCounter(targetUrl: string): Promise<WsMessageCounter> {
  const target = new URL(targetUrl);
  const messages: WireMessage[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = connect(Number(target.port), target.hostname);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
    relay(inbound, outbound, 'up', messages);
    relay(outbound, inbound, 'down', messages);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: targetUrl.replace(`${target.hostname}:${target.port}`, `127.0.0.1:${port}`),
    messages,
    reset: () => void messages.splice(0),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Pipes `from` to `to` untouched, reading a copy of the bytes into messages. */
function relay(from: Socket, to: Socket, dir: 'up' | 'down', out: WireMessage[]): void {
  const reader = new WsFrameReader();
  from.on('data', (chunk: Buffer) => {
    to.write(chunk);
    for (const f of reader.feed(chunk))
      if (f.opcode === 1 || f.opcode === 2) out.push(classify(dir, f.opcode === 1 ? 'text' : 'binary', f.payload.subarray(0, HEAD_BYTES)));
  });
}

function classify(dir: 'up' | 'down', kind: 'text' | 'binary', payload: Buffer): WireMessage {
  // A binary frame: 4-byte header length, then the header's JSON ({"method": …}).
  const text =
    kind === 'binary'
      ? payload.length < 4
        ? ''
        : payload.subarray(4, 4 + payload.readUInt32BE(0)).toString('utf8')
      : payload.toString('utf8');
  const method = /^\{"jsonrpc":"2\.0",(?:"id":[^,]+,)?"method":"([^"]+)"/.exec(text)?.[1] ?? /^\{"method":"([^"]+)"/.exec(text)?.[1];
  const what = method ?? (/^\{"jsonrpc":"2\.0","id":[^,]+,"(?:result|error)"/.test(text) ? 'response' : '?');
  return { dir, kind, what, head: text };
}
