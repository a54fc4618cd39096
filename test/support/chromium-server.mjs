// The run's Chromium (test/support/global-chromium.ts starts this): a playwright browser server
// in a process of its own, so the test files' browser traffic does not queue behind vitest's
// main thread. Prints its WebSocket endpoint as one line; closes the browser on SIGTERM or when
// stdin ends (its parent gone).
import { chromium } from 'playwright-core';

const options = JSON.parse(process.argv[2]);
const server = await chromium.launchServer({ ...options, host: '127.0.0.1', port: 0 });
process.stdout.write(`${server.wsEndpoint()}\n`);
let closing;
const close = () => (closing ??= server.close().finally(() => process.exit(0)));
process.on('SIGTERM', close);
process.stdin.on('end', close).resume();
server.on('close', () => process.exit(1));
