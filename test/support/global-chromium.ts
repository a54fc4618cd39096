import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { CHROMIUM_LAUNCH, PAGE_TIMEOUT_MS } from './chromium-launch.js';
import { withTimeout } from './wait.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where a test file asks for the run's Chromium (test/support/global-chromium.ts); GET answers its WebSocket endpoint. */
    chromiumBroker: string;
  }
}

const SERVER_SCRIPT = fileURLToPath(new URL('chromium-server.mjs', import.meta.url));

/** The run's one broker (global setups run once per project: both get this one). */
interface Broker {
  url: string;
  users: number;
  server: Server;
  /** The browser server's process and its endpoint, once a file asked. */
  browser?: Promise<{ child: ChildProcess; wsEndpoint: string }>;
}
const BROKER = Symbol.for('tether.test.chromiumBroker');
const g = globalThis as { [BROKER]?: Promise<Broker> };

/**
 * Vitest global setup: one Chromium for the whole run instead of one per file (a Chromium's
 * start costs about 0.35 CPU-s more than a connection to a running one). It starts on the first
 * request, so a run without browser tests never starts it, in a process of its own
 * (chromium-server.mjs); a file connects to it (test/support/browser.ts launchChromium) and gets
 * its own contexts, which its browser.close() closes. The broker is a tiny HTTP server on
 * 127.0.0.1, port 0.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const broker = await (g[BROKER] ??= startBroker());
  broker.users++;
  project.provide('chromiumBroker', broker.url);
  return async () => {
    if (--broker.users > 0) return;
    delete g[BROKER];
    broker.server.close();
    const started = await broker.browser?.catch(() => undefined);
    if (started && started.child.exitCode === null) {
      const exited = new Promise((resolve) => started.child.once('exit', resolve));
      started.child.kill('SIGTERM');
      await withTimeout(exited, 10_000, "the run's Chromium to close").catch(() => started.child.kill('SIGKILL'));
    }
  };
}

/** Starts the browser server's process; resolves with its endpoint (bounded by PAGE_TIMEOUT_MS). */
function startBrowser(): Promise<{ child: ChildProcess; wsEndpoint: string }> {
  const child = spawn(process.execPath, [SERVER_SCRIPT, JSON.stringify(CHROMIUM_LAUNCH)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const endpoint = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`Chromium's server exited (${code}) before it listened`)));
    child.once('error', reject);
  });
  return withTimeout(endpoint, PAGE_TIMEOUT_MS, "Chromium's server to listen").then(
    (wsEndpoint) => ({ child, wsEndpoint }),
    (err: unknown) => {
      child.kill('SIGKILL');
      throw err;
    },
  );
}

async function startBroker(): Promise<Broker> {
  const server = createServer();
  const broker: Broker = { url: '', users: 0, server };
  server.on('request', (_req, res) => {
    // Started once; a failed start, or a Chromium that went away, is started again by the next file.
    broker.browser ??= startBrowser().then(
      (b) => {
        b.child.once('exit', () => (broker.browser = undefined));
        return b;
      },
      (err: unknown) => {
        broker.browser = undefined;
        throw err;
      },
    );
    broker.browser.then(
      (b) => res.writeHead(200, { 'content-type': 'text/plain' }).end(b.wsEndpoint),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`Chromium did not start: ${String(err)}`),
    );
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  broker.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  server.unref();
  return broker;
}
