/**
 * A hand-driven client connection for hostile-client tests: it sends JSON-RPC text exactly as
 * given (so a test can send what our own library would refuse to build) and, unless told not
 * to read, collects the answers by id. Over ws:// or grpc://, through the real dialers.
 */
import type { Channel } from '../../core/channel/channel.js';
import { dial } from '../../core/link/dial.js';
import { PROTOCOL_VERSION } from '../../core/protocol/version.js';
import { withTimeout } from './wait.js';

export interface RawAnswer {
  id: number;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: { code?: string } };
}

export interface RawClient {
  channel: Channel;
  /** Sends one request whose params are the given JSON text; resolves with its answer (reading clients only). */
  call(method: string, paramsJson: string): Promise<RawAnswer>;
  /** Sends one request and does not wait for anything. */
  fire(method: string, paramsJson?: string): Promise<void>;
  /** How many of the gateway's heartbeat pings this client has answered (a reading client answers each). */
  readonly pingsAnswered: number;
  close(): void;
}

/**
 * Dials and says hello as a client. With `read: false` nobody ever pulls from the channel
 * after the hello: the adapter stops reading its socket once its small inbound queue is full,
 * and from then on the gateway's answers pile up on its side, as with a client that never reads.
 */
export async function rawClient(url: string, token: string | undefined, opts: { read?: boolean } = {}): Promise<RawClient> {
  const channel = await dial(url, { token });
  const waiting = new Map<number, (a: RawAnswer) => void>();
  let nextId = 1;
  let pings = 0;
  const send = (id: number, method: string, paramsJson: string) =>
    channel.send(`{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":${paramsJson}}`);
  const reader = async (stopAfterHello: boolean) => {
    for await (const frame of channel) {
      if (typeof frame !== 'string') continue; // binary frames carry engine lines, never answers
      const msg = JSON.parse(frame) as RawAnswer & { method?: string };
      if (msg.method === 'ping' && msg.id !== undefined) {
        pings++;
        void channel.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: {} })).catch(() => {});
      } else if (msg.method === undefined) waiting.get(msg.id)?.(msg);
      if (stopAfterHello && msg.id === 1) return;
    }
  };
  const call = (method: string, paramsJson: string) => {
    const id = nextId++;
    const answered = new Promise<RawAnswer>((resolve) => waiting.set(id, resolve));
    void send(id, method, paramsJson).catch(() => {});
    return withTimeout(answered, 15_000, `the answer to ${method}`);
  };
  const readAll = opts.read ?? true;
  const reading = reader(!readAll);
  const hello = await call('hello', JSON.stringify({ protocol_version: PROTOCOL_VERSION, role: 'client' }));
  if (hello.error) throw new Error(`hello refused: ${hello.error.message}`);
  if (!readAll) await reading;
  return {
    channel,
    call: (method, paramsJson) => {
      if (!readAll) throw new Error('this client does not read');
      return call(method, paramsJson);
    },
    fire: (method, paramsJson = '{}') => send(nextId++, method, paramsJson),
    get pingsAnswered() {
      return pings;
    },
    close: () => channel.close('OK', 'test done'),
  };
}
