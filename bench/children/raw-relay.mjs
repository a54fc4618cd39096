/**
 * The baselines' relay: a minimal two-hop relay written with the same libraries as the
 * gateway and no protocol of ours. One "agent" connection (ws path /agent, or gRPC metadata
 * role=agent) and any number of clients: every client message goes to the agent as is, and
 * every agent message goes to every client as is (so with many clients it is the raw
 * broadcast relay of the fan-out figure: the naive loop of `send` per client, as in the ws
 * README). permessage-deflate off, like the gateway.
 *
 *   --transport ws|grpc [--send buffer|string|promise] [--read] [--duties]
 *
 * --read (with raw-agent.mjs --read): the least a relay that numbers, keeps and checks its
 * frames must do, written straight on `ws` or grpc-js: each client message is parsed, its `line` checked
 * to be an object with a `type`, serialized and sent to the agent with an input seq; each agent
 * message is parsed, numbered, kept in a bounded log (a ring of 10,000) and sent to every client
 * as `{"seq":n,"line":…}`. For the round trip's floor of a reading relay (round-trip-cpu.mjs --read).
 *
 * --duties (implies --read): also what every prompt must get from a gateway, by issues other
 * than speed, done the least costly way on the same libraries: the line stamped with a uuid (a
 * copy, as the gateway's stamp) and checked and serialized by the gateway's own engine input
 * check (core/protocol/engine-input.ts, from dist/: object, string type, nesting, size), its
 * author kept by uuid (a map that forgets its oldest past 4,096), an audit record kept in
 * memory, and the echo (the stamped prompt as a numbered frame with its author, kept in the
 * log) sent to its poster at once, as the gateway sends it. The round trip's floor for a relay that does a prompt's duties
 * (round-trip-cpu.mjs --duties, figure 1's diagnostic row).
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import grpc from '@grpc/grpc-js';
import { WebSocketServer } from 'ws';
import { argsOf, serve } from '../lib/child.mjs';
import { RELAY_SERVICE } from '../lib/raw-grpc.mjs';

const a = argsOf();
const transport = a.transport ?? 'ws';
/**
 * How the ws relay sends to its clients: `buffer` (the baseline: the received bytes as they
 * are), or, to measure levers of our own code path with everything else equal, `string`
 * (a string per frame, encoded per client) and `promise` (a string plus a callback and a
 * promise per client, like core/channel/ws.ts write()).
 */
const send = a.send ?? 'buffer';
const duties = a.duties === true;
const read = a.read === true || duties;
/** --duties only: our engine input check (the raw modes load no code of ours). */
const { checkEngineInput } = duties ? await import('../../dist/core/protocol/engine-input.js') : {};
let close;

/** --read: the relay's numbering and log. */
const LOG_SIZE = 10_000;
const log = new Array(LOG_SIZE);
let outSeq = 0;
let inSeq = 0;
/** An agent message as a numbered frame for the clients, kept in the log; undefined: not a frame. */
function numbered(data) {
  const m = JSON.parse(data);
  if (typeof m !== 'object' || m === null || typeof m.line !== 'object' || m.line === null) return undefined;
  const frame = `{"seq":${++outSeq},"line":${JSON.stringify(m.line)}}`;
  log[outSeq % LOG_SIZE] = frame;
  return frame;
}
/** A client message checked and numbered for the agent; undefined: refused. With --duties, `client` gets the prompt's duties. */
function toAgent(data, client) {
  const m = JSON.parse(data);
  if (typeof m !== 'object' || m === null || typeof m.line !== 'object' || m.line === null || typeof m.line.type !== 'string')
    return undefined;
  if (!duties) return `{"seq":${++inSeq},"line":${JSON.stringify(m.line)}}`;
  const uuid = randomUUID();
  const stamped = Object.assign({}, m.line);
  stamped.uuid = uuid;
  let text;
  try {
    text = checkEngineInput(stamped); // the gateway's own check, which serializes the line too
  } catch {
    return undefined;
  }
  authors.set(uuid, client.name);
  if (authors.size > 4096) authors.delete(authors.keys().next().value);
  audit[auditSeq++ % LOG_SIZE] = { at: new Date().toISOString(), actor: client.name, action: 'session.prompt', uuid };
  const echo = `{"seq":${++outSeq},"kind":"prompt","author":${JSON.stringify(client.name)},"line":${text}}`;
  log[outSeq % LOG_SIZE] = echo;
  client.deliver(echo);
  return `{"seq":${++inSeq},"line":${text}}`;
}

/** --duties: the prompts' authors by uuid, the audit trail in memory. */
const authors = new Map();
const audit = new Array(LOG_SIZE);
let auditSeq = 0;
let info;

if (transport === 'ws') {
  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  let agent;
  const clients = new Set();
  wss.on('connection', (ws, req) => {
    ws.on('error', () => {});
    if (req.url === '/agent') {
      agent = ws;
      ws.on('message', (data, isBinary) => {
        if (read) {
          const frame = numbered(data);
          if (frame !== undefined) for (const c of clients) c.send(frame);
        } else if (send === 'buffer') {
          for (const c of clients) c.send(data, { binary: isBinary });
        } else if (send === 'string') {
          const text = data.toString();
          for (const c of clients) c.send(text);
        } else {
          // What our channel does per frame and client: a promise around a send with a callback.
          const text = data.toString();
          for (const c of clients) new Promise((resolve, reject) => c.send(text, (err) => (err ? reject(err) : resolve()))).catch(() => {});
        }
      });
      ws.on('close', () => {
        if (agent === ws) agent = undefined;
      });
      return;
    }
    clients.add(ws);
    ws.name = `client-${clients.size}`;
    ws.deliver = (text) => ws.send(text);
    ws.on('message', (data, isBinary) => {
      if (!read) return agent?.send(data, { binary: isBinary });
      const line = toAgent(data, ws);
      if (line !== undefined) agent?.send(line);
    });
    ws.on('close', () => clients.delete(ws));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  info = { url: `ws://127.0.0.1:${server.address().port}` };
  close = async () => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
} else {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  let agent;
  const clients = new Set();
  server.addService(RELAY_SERVICE, {
    Connect: (call) => {
      call.on('error', () => {});
      const role = call.metadata.get('role')[0];
      if (role === 'agent') {
        agent = call;
        call.on('data', (b) => {
          if (!read) for (const c of clients) c.write(b);
          else {
            const frame = numbered(b);
            if (frame !== undefined) for (const c of clients) c.deliver(frame);
          }
        });
        call.on('end', () => call.end());
        return;
      }
      clients.add(call);
      call.name = `client-${clients.size}`;
      call.deliver = (text) => call.write(Buffer.from(text));
      call.on('data', (b) => {
        if (!read) return agent?.write(b);
        const line = toAgent(b, call);
        if (line !== undefined) agent?.write(Buffer.from(line));
      });
      call.on('end', () => {
        clients.delete(call);
        call.end();
      });
      call.on('cancelled', () => clients.delete(call));
      call.sendMetadata(new grpc.Metadata());
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  info = { url: `127.0.0.1:${port}` };
  close = () => server.forceShutdown();
}

const { ready } = serve({}, { onExit: () => close() });
ready(info);
