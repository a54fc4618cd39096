import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type BrowserServer, chromium } from 'playwright-core';
import type { TestProject } from 'vitest/node';
import { CHROMIUM_LAUNCH } from './chromium-launch.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where a test file asks for the run's Chromium (test/support/global-chromium.ts); GET answers its WebSocket endpoint. */
    chromiumBroker: string;
  }
}

/** The run's one broker (global setups run once per project: both get this one). */
interface Broker {
  url: string;
  users: number;
  server: Server;
  browser?: Promise<BrowserServer>;
}
const BROKER = Symbol.for('tether.test.chromiumBroker');
const g = globalThis as { [BROKER]?: Promise<Broker> };

/**
 * Vitest global setup: one Chromium for the whole run instead of one per file (a Chromium's
 * start and its idle processes cost about a CPU-second each time). It starts on the first
 * request, so a run without browser tests never starts it; a file connects to it
 * (test/support/browser.ts launchChromium) and gets its own contexts, which its
 * browser.close() closes. The broker is a tiny HTTP server on 127.0.0.1, port 0.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const broker = await (g[BROKER] ??= startBroker());
  broker.users++;
  project.provide('chromiumBroker', broker.url);
  return async () => {
    if (--broker.users > 0) return;
    delete g[BROKER];
    broker.server.close();
    await (await broker.browser?.catch(() => undefined))?.close();
  };
}

async function startBroker(): Promise<Broker> {
  const server = createServer();
  const broker: Broker = { url: '', users: 0, server };
  server.on('request', (_req, res) => {
    // Started once; a failed start, or a Chromium that went away, is started again by the next file.
    broker.browser ??= chromium.launchServer({ ...CHROMIUM_LAUNCH, host: '127.0.0.1', port: 0 }).then(
      (b) => {
        b.on('close', () => (broker.browser = undefined));
        return b;
      },
      (err: unknown) => {
        broker.browser = undefined;
        throw err;
      },
    );
    broker.browser.then(
      (b) => res.writeHead(200, { 'content-type': 'text/plain' }).end(b.wsEndpoint()),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`Chromium did not start: ${String(err)}`),
    );
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  broker.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  server.unref();
  return broker;
}
