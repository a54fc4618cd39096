/**
 * The baselines' relay: a minimal two-hop relay written with the same libraries as the
 * gateway and no protocol of ours. One "agent" connection (ws path /agent, or gRPC metadata
 * role=agent) and any number of clients: every client message goes to the agent as is, and
 * every agent message goes to every client as is (so with many clients it is the raw
 * broadcast relay of the fan-out figure: the naive loop of `send` per client, as in the ws
 * README). permessage-deflate off, like the gateway.
 *
 *   --transport ws|grpc
 */
import { createServer } from 'node:http';
import grpc from '@grpc/grpc-js';
import { WebSocketServer } from 'ws';
import { argsOf, serve } from '../lib/child.mjs';
import { RELAY_SERVICE } from '../lib/raw-grpc.mjs';

const a = argsOf();
const transport = a.transport ?? 'ws';
let close;
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
        const t0 = process.hrtime.bigint();
        for (const c of clients) c.send(data, { binary: isBinary });
        globalThis.loopNs = (globalThis.loopNs ?? []);
        globalThis.loopNs.push(Number(process.hrtime.bigint() - t0) / 1e6);
      });
      ws.on('close', () => {
        if (agent === ws) agent = undefined;
      });
      return;
    }
    clients.add(ws);
    ws.on('message', (data, isBinary) => agent?.send(data, { binary: isBinary }));
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
          for (const c of clients) c.write(b);
        });
        call.on('end', () => call.end());
        return;
      }
      clients.add(call);
      call.on('data', (b) => agent?.write(b));
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

const { ready } = serve({ loops: () => { const l = globalThis.loopNs ?? []; globalThis.loopNs = []; return l.slice(-40).map((x) => +x.toFixed(2)); } }, { onExit: () => close() });
ready(info);
