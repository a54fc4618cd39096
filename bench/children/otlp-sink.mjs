/**
 * A stand-in OTLP/HTTP collector for the "tracing on" runs: takes every export (POST
 * /v1/traces), counts requests and bytes, drops the spans and answers 200 as a collector does.
 * A process of its own, so its CPU is not counted as Tether's. Answers stats over IPC.
 */
import { createServer } from 'node:http';
import { serve } from '../lib/child.mjs';

let requests = 0;
let bytes = 0;
const server = createServer((req, res) => {
  requests++;
  req.on('data', (c) => (bytes += c.length));
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { ready } = serve({ stats: () => ({ requests, bytes }) }, { onExit: () => new Promise((r) => server.close(r)) });
ready({ url: `http://127.0.0.1:${server.address().port}` });
