/**
 * A minimal client of our gateway protocol on a raw `ws` socket (JSON-RPC 2.0 text frames),
 * for the benchmark's many viewers and idle connections, where a full GatewayClient per
 * connection would measure the driver rather than the gateway. Frames the gateway pushes
 * (session.frame notifications) go to `onFrame(buffer)` untouched; only answers to our own
 * requests are parsed.
 */
import { WebSocket } from 'ws';
import { PROTOCOL_VERSION } from '../../dist/core/protocol/version.js';

export async function connectWire(url, { role = 'client', agent, onFrame, onRequest } = {}) {
  const ws = new WebSocket(`${url}/v1/connect`, { perMessageDeflate: false, maxPayload: 64 * 1024 * 1024, handshakeTimeout: 10_000 });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  ws.on('error', () => {});
  const pending = requestTable();
  const wire = {
    ws,
    onFrame,
    request: (method, params, timeoutMs) => pending.request(method, params, timeoutMs, (text) => ws.send(text)),
    close() {
      ws.terminate();
    },
  };
  ws.on('close', () => pending.failAll());
  ws.on('message', (data) => {
    // The gateway serialises notifications as {"jsonrpc":"2.0","method":… and requests and
    // answers as {"jsonrpc":"2.0","id":…: byte 18 tells them apart without parsing.
    if (data[18] === 0x6d /* m */) {
      wire.onFrame?.(data);
      return;
    }
    const msg = JSON.parse(data.toString());
    if (msg.method && msg.id !== undefined) {
      // A request from the gateway (agents only).
      Promise.resolve()
        .then(() => onRequest?.(msg.method, msg.params))
        .then(
          (result) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: result ?? {} })),
          (err) =>
            ws.send(
              JSON.stringify({
                jsonrpc: '2.0',
                id: msg.id,
                error: { code: -32000, message: String(err?.message ?? err), data: { code: 'INTERNAL' } },
              }),
            ),
        );
      return;
    }
    if (msg.method) {
      wire.onFrame?.(data);
      return;
    }
    pending.answer(msg);
  });
  await wire.request('hello', {
    protocol_version: PROTOCOL_VERSION,
    role,
    capabilities: [],
    ...(agent ? { agent } : { software: 'tether-bench' }),
  });
  return wire;
}

/**
 * The same minimal client over our own transport layer (dist/core/link/dial: WsChannel or
 * GrpcClientChannel), for ws:// and grpc:// alike: hand-written JSON-RPC, no RpcPeer, no
 * schema validation, no GatewayClient. Pushed frames go to `onFrame(text)` unparsed;
 * requests from the gateway (heartbeat pings) are answered with `{}`.
 */
export async function connectChannelWire(url) {
  const { dial } = await import('../../dist/core/link/dial.js');
  const channel = await dial(url, {});
  const pending = requestTable();
  const w = {
    channel,
    onFrame: undefined,
    /** How the channel closed, once it has (this client does not reconnect: the gateway's cut of a slow reader ends it). */
    closedInfo: undefined,
    /** Called once when the channel closes. */
    onClose: undefined,
    request: (method, params, timeoutMs) => pending.request(method, params, timeoutMs, (text) => channel.send(text)),
    close() {
      channel.close('OK', 'bench done');
    },
  };
  void (async () => {
    for await (const frame of channel) {
      if (frame.charCodeAt(18) === 0x6d /* {"jsonrpc":"2.0","method" */) {
        w.onFrame?.(frame);
        continue;
      }
      const msg = JSON.parse(frame);
      if (msg.method && msg.id !== undefined) {
        channel.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: {} })).catch(() => {});
        continue;
      }
      pending.answer(msg);
    }
    pending.failAll();
  })();
  void channel.closed.then((info) => {
    w.closedInfo = info;
    w.onClose?.(info);
  });
  await w.request('hello', { protocol_version: PROTOCOL_VERSION, role: 'client', capabilities: [], software: 'tether-bench' });
  return w;
}

/**
 * Our requests awaiting answers, by id, each bounded by a timeout. `send(text)` may return a
 * promise (a channel's send); its rejection fails the request at once.
 */
function requestTable() {
  const pending = new Map();
  let nextId = 1;
  const settle = (id) => {
    const p = pending.get(id);
    if (p) {
      pending.delete(id);
      clearTimeout(p.t);
    }
    return p;
  };
  return {
    request(method, params, timeoutMs = 60_000, send) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${method}: no answer within ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, { resolve, reject, t, method });
        const text = JSON.stringify({ jsonrpc: '2.0', id, method, params });
        // A send that throws or rejects (the connection is gone) fails this request at once.
        Promise.resolve()
          .then(() => send(text))
          .catch((err) => {
            settle(id);
            reject(err);
          });
      });
    },
    /** Settles the request an answer (a JSON-RPC response object) is for; others are ignored. */
    answer(msg) {
      const p = settle(msg.id);
      if (!p) return;
      if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
      else p.resolve(msg.result);
    },
    /** Fails every request still waiting: the connection closed. */
    failAll() {
      for (const [id, p] of [...pending]) {
        settle(id);
        p.reject(new Error(`${p.method}: connection closed`));
      }
    },
  };
}
