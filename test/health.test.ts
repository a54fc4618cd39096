import { credentials, loadPackageDefinition, type Client, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROTO_LOADER_OPTIONS } from '../core/channel/proto.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { FileSessionStore, MemorySessionStore } from '../gateway/session/session-store.js';
import { waitFor } from './support/wait.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** A store that is not open until the test says so (a volume not mounted yet, say). */
class ClosedStore extends MemorySessionStore {
  open = false;
  override get isOpen(): boolean {
    return this.open;
  }
}

type HealthClient = Client & {
  Check(req: { service: string }, cb: (err: ServiceError | null, res?: { status: string }) => void): void;
  Watch(req: { service: string }): ClientReadableStream<{ status: string }>;
  List(req: object, cb: (err: ServiceError | null, res?: { statuses: Record<string, { status: string }> }) => void): void;
};

function healthClient(port: number): HealthClient {
  const def = loadSync('grpc/health/v1/health.proto', {
    ...PROTO_LOADER_OPTIONS,
    includeDirs: [new URL('../proto', import.meta.url).pathname],
  });
  const pkg = loadPackageDefinition(def) as unknown as {
    grpc: { health: { v1: { Health: new (addr: string, creds: ReturnType<typeof credentials.createInsecure>) => HealthClient } } };
  };
  return new pkg.grpc.health.v1.Health(`127.0.0.1:${port}`, credentials.createInsecure());
}

const check = (c: HealthClient, service: string) =>
  new Promise<string>((resolve, reject) => c.Check({ service }, (err, res) => (err ? reject(err) : resolve(res!.status))));

const get = async (server: GatewayServer, path: string) => {
  const res = await fetch(`http://127.0.0.1:${server.port}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('health: /healthz, /readyz and grpc.health.v1.Health', () => {
  const cleanups = cleanupsPerTest();

  it('answer ready while listening with the store open, and say which check failed when the store goes', async () => {
    const storeDir = join(cleanups.tempDir('tether-health-').path, 'sessions');
    const server = cleanups.own(await startGatewayServer(new Gateway({ store: new FileSessionStore(storeDir) }), { port: 0, grpcPort: 0 }));
    const grpc = cleanups.own(healthClient(server.grpcPort!));

    expect(await get(server, '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await get(server, '/readyz')).toEqual({
      status: 200,
      body: { status: 'ready', checks: { listening: 'ok', store: 'ok', policy: 'ok' } },
    });
    expect(await check(grpc, '')).toBe('SERVING');
    expect(await check(grpc, 'tether.v1.Gateway')).toBe('SERVING');
    await expect(check(grpc, 'nope.Service')).rejects.toMatchObject({ code: 5 }); // NOT_FOUND

    const seen: string[] = [];
    const watch = grpc.Watch({ service: '' });
    watch.on('data', (r: { status: string }) => seen.push(r.status));
    watch.on('error', () => {}); // CANCELLED when the client closes
    await waitFor(() => seen.length === 1, 10_000, 'health event 1');
    expect(seen).toEqual(['SERVING']);

    rmSync(storeDir, { recursive: true }); // the store's storage is gone
    expect(await get(server, '/readyz')).toEqual({
      status: 503,
      body: {
        status: 'not_ready',
        failed: ['store'],
        checks: { listening: 'ok', store: 'session store (file) is not open', policy: 'ok' },
      },
    });
    expect(await get(server, '/healthz')).toEqual({ status: 200, body: { status: 'ok' } }); // alive all the same
    expect(await check(grpc, '')).toBe('NOT_SERVING');
    await waitFor(() => seen.length === 2, 10_000, 'health event 2');
    expect(seen).toEqual(['SERVING', 'NOT_SERVING']);

    mkdirSync(storeDir);
    expect((await get(server, '/readyz')).status).toBe(200);
    expect(await check(grpc, 'tether.v1.Gateway')).toBe('SERVING');
    await waitFor(() => seen.length === 3, 10_000, 'health event 3');

    const closing = server.close(); // watchers hear NOT_SERVING, then the stream ends
    await waitFor(() => seen.length === 4, 10_000, 'health event 4');
    expect(seen).toEqual(['SERVING', 'NOT_SERVING', 'SERVING', 'NOT_SERVING']);
    await closing;
  });

  it('report the store check failing from the start with a store that is not open', async () => {
    const store = new ClosedStore();
    const server = cleanups.own(await startGatewayServer(new Gateway({ store }), { port: 0, grpcPort: 0, metrics: false }));
    const grpc = cleanups.own(healthClient(server.grpcPort!));
    const ready = await get(server, '/readyz');
    expect(ready).toEqual({
      status: 503,
      body: {
        status: 'not_ready',
        failed: ['store'],
        checks: { listening: 'ok', store: 'session store (memory) is not open', policy: 'ok' },
      },
    });
    expect(await check(grpc, '')).toBe('NOT_SERVING');
    const list = await new Promise<Record<string, { status: string }>>((resolve, reject) =>
      grpc.List({}, (err, res) => (err ? reject(err) : resolve(res!.statuses))),
    );
    expect(list).toEqual({ '': { status: 'NOT_SERVING' }, 'tether.v1.Gateway': { status: 'NOT_SERVING' } });
    expect(server.readiness()).toEqual({ ready: false, failed: ['store'], checks: ready.body.checks });

    store.open = true;
    expect(await get(server, '/readyz')).toEqual({
      status: 200,
      body: { status: 'ready', checks: { listening: 'ok', store: 'ok', policy: 'ok' } },
    });
    expect(await check(grpc, '')).toBe('SERVING');
    // metrics: false turns /metrics off; only GET and HEAD are served.
    expect((await fetch(`http://127.0.0.1:${server.port}/metrics`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${server.port}/readyz`, { method: 'POST' })).status).toBe(405);
  });

  it('fail readiness on an extra check too (an operator-supplied one)', async () => {
    let why: string | undefined = 'warming up';
    const server = cleanups.own(
      await startGatewayServer(new Gateway(), { port: 0, grpcPort: null, readinessChecks: [{ name: 'warm', check: () => why }] }),
    );
    expect(await get(server, '/readyz')).toEqual({
      status: 503,
      body: { status: 'not_ready', failed: ['warm'], checks: { listening: 'ok', store: 'ok', policy: 'ok', warm: 'warming up' } },
    });
    why = undefined;
    expect((await get(server, '/readyz')).status).toBe(200);
  });
});
