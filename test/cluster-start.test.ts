import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runTether, startTether } from './support/cli.js';
import { startNatsServer } from './support/nats-server.js';
import { makeTempDir } from './support/claude-cli.js';
import { hasTool } from './support/tools.js';

/** A port nothing listens on: bound to 0, then closed. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `tether gateway --cluster`: refused before anything listens when the cluster is unusable. */
describe.skipIf(!hasTool('nats-server'))('joining a cluster at start', () => {
  const gateway = (cluster: string) => {
    const state = makeTempDir('tether-state-');
    return runTether(['gateway', '--port', '0', '--grpc-port', 'off', '--auth', 'off', '--state-dir', state.path, '--cluster', cluster], { timeoutMs: 20_000 }).finally(() => state.cleanup());
  };

  it.each([
    ['http://127.0.0.1:4222', 'must be a nats:// (or tls://) URL'],
    ['nats://127.0.0.1', 'needs a host and a port'],
    ['not a url', 'must be a URL like nats://HOST:4222'],
    ['nats://user:secret@127.0.0.1:4222', 'takes no path, query or credentials'],
  ])('a bad --cluster URL (%s) is a configuration error: exit 2, the reason named, nothing started', async (url, reason) => {
    const r = await gateway(url);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('cluster (from --cluster)');
    expect(r.stderr).toContain(reason);
    expect(r.stdout).not.toContain('gateway: ');
    expect(r.stderr).not.toContain('secret');
  });

  it('the cluster comes from the config file or TETHER_CLUSTER too, checked the same way', async () => {
    const state = makeTempDir('tether-state-');
    try {
      const config = `${state.path}/gateway.yaml`;
      writeFileSync(config, 'cluster: nats://127.0.0.1\n');
      const fromFile = await runTether(['gateway', '--config', config, '--auth', 'off', '--state-dir', state.path]);
      expect(fromFile.code).toBe(2);
      expect(fromFile.stderr).toMatch(/cluster \(from .*gateway\.yaml\).*needs a host and a port/);
      const fromEnv = await runTether(['gateway', '--auth', 'off', '--state-dir', state.path], { env: { TETHER_CLUSTER: 'redis://127.0.0.1:6379' } });
      expect(fromEnv.code).toBe(2);
      expect(fromEnv.stderr).toMatch(/cluster \(from TETHER_CLUSTER\).*must be a nats:\/\//);
    } finally {
      state.cleanup();
    }
  });

  it('a NATS server that cannot be reached: exit 1 with the address, before any port opens', async () => {
    const port = await freePort();
    const started = Date.now();
    const r = await gateway(`nats://127.0.0.1:${port}`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`tether: cannot reach the cluster's NATS server at nats://127.0.0.1:${port}`);
    expect(r.stdout).not.toContain('gateway: ');
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('a NATS server without JetStream: exit 1 saying so, before any port opens', async () => {
    const nats = await startNatsServer({ jetstream: false });
    try {
      const r = await gateway(nats.url);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`tether: the cluster's NATS server at ${nats.url} has no usable JetStream`);
      expect(r.stdout).not.toContain('gateway: ');
    } finally {
      await nats.stop();
    }
  });

  it('a clustered gateway stops cleanly on SIGTERM, and says on /readyz that its cluster link is up until then', async () => {
    const nats = await startNatsServer();
    const state = makeTempDir('tether-state-');
    const gw = startTether(['gateway', '--port', '0', '--grpc-port', 'off', '--auth', 'off', '--state-dir', state.path, '--cluster', nats.url]);
    try {
      const url = (await gw.line('gateway: ')).slice('gateway: '.length);
      expect(await gw.line('cluster: ')).toMatch(new RegExp(`^cluster: ${nats.url} \\(gateway gw-[0-9a-f]+\\)$`));
      const ready = await fetch(new URL('/readyz', url.replace('ws', 'http')));
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { checks: Record<string, string> }).checks.cluster).toBe('ok');
      expect(await gw.stop('SIGTERM', 10_000)).toEqual({ code: 0, signal: null });
    } finally {
      await gw.stop('SIGKILL');
      await nats.stop();
      state.cleanup();
    }
  });

  it('--help documents --cluster', async () => {
    const r = await runTether(['gateway', '--help']);
    expect(r.stdout).toContain('--cluster URL');
    expect(r.stdout).toContain('nats://HOST:PORT');
  });
});
