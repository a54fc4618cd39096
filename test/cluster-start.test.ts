import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runTether, startTether } from './support/cli.js';
import { startNatsServer } from './support/nats-server.js';
import { makeTempDir } from './support/claude-cli.js';
import { makeCerts } from './support/certs.js';
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
    return runTether(['gateway', '--port', '0', '--grpc-port', 'off', '--auth', 'off', '--state-dir', state.path, '--cluster', cluster], {
      timeoutMs: 20_000,
    }).finally(() => state.cleanup());
  };

  it.each([
    ['http://127.0.0.1:4222', 'must be a nats:// (or tls://) URL'],
    ['nats://127.0.0.1', 'needs a host and a port'],
    ['not a url', 'must be a URL like nats://HOST:4222'],
    ['nats://user:secret@127.0.0.1:4222/path', 'takes no path or query'],
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
      const fromEnv = await runTether(['gateway', '--auth', 'off', '--state-dir', state.path], {
        env: { TETHER_CLUSTER: 'redis://127.0.0.1:6379' },
      });
      expect(fromEnv.code).toBe(2);
      expect(fromEnv.stderr).toMatch(/cluster \(from TETHER_CLUSTER\).*must be a nats:\/\//);
    } finally {
      state.cleanup();
    }
  });

  it('a NATS server that cannot be reached: exit 1 with the address, before any port opens', async () => {
    const port = await freePort();
    const started = Date.now();
    const r = await gateway(`nats://gw:secret@127.0.0.1:${port}`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`tether: cannot reach the cluster's NATS server at nats://127.0.0.1:${port}`);
    expect(r.stderr).not.toContain('secret');
    expect(r.stdout).not.toContain('gateway: ');
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('a NATS server without JetStream: exit 1 saying so, before any port opens', async () => {
    const nats = await startNatsServer({ jetstream: false });
    try {
      const r = await gateway(nats.authUrl);
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
    const gw = startTether([
      'gateway',
      '--port',
      '0',
      '--grpc-port',
      'off',
      '--auth',
      'off',
      '--state-dir',
      state.path,
      '--cluster',
      nats.authUrl,
    ]);
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

  it('--help documents how the gateway authenticates to NATS', async () => {
    const r = await runTether(['gateway', '--help']);
    for (const flag of [
      '--cluster-creds FILE',
      '--cluster-nkey FILE',
      '--cluster-user USER',
      '--cluster-token-file FILE',
      '--cluster-tls-ca FILE',
      '--cluster-tls-cert FILE',
      '--cluster-insecure-no-auth',
    ])
      expect(r.stdout).toContain(flag);
  });
});

/** Issue 27, item 9: a cluster's NATS must authenticate the gateways. */
describe("authenticating to the cluster's NATS", () => {
  const started = (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const state = makeTempDir('tether-state-');
    const gw = startTether(['gateway', '--port', '0', '--grpc-port', 'off', '--auth', 'off', '--state-dir', state.path, ...args], { env });
    return { gw, stop: async () => (await gw.stop('SIGKILL'), state.cleanup()) };
  };
  const readyCluster = async (url: string) => {
    const ready = await fetch(new URL('/readyz', url.replace('ws', 'http')));
    return ((await ready.json()) as { checks: Record<string, string> }).checks.cluster;
  };

  it('cluster keys that do not go together are a configuration error: exit 2, each named, nothing started', async () => {
    const state = makeTempDir('tether-state-');
    try {
      const r = await runTether(
        [
          'gateway',
          '--port',
          '0',
          '--grpc-port',
          'off',
          '--auth',
          'off',
          '--state-dir',
          state.path,
          '--cluster',
          'nats://gw:pw@127.0.0.1:4222',
          '--cluster-user',
          'gw',
        ],
        {
          env: { TETHER_CLUSTER_PASSWORD: 'pw' },
        },
      );
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('give one way to authenticate, not --cluster-user and credentials in the URL');
      expect(r.stdout).not.toContain('gateway: ');
    } finally {
      state.cleanup();
    }
  });

  it('a cluster without authentication is refused with the reason; --cluster-insecure-no-auth starts it with a warning', async () => {
    const nats = await startNatsServer({ auth: 'none' });
    const state = makeTempDir('tether-state-');
    try {
      const refused = await runTether(
        ['gateway', '--port', '0', '--grpc-port', 'off', '--auth', 'off', '--state-dir', state.path, '--cluster', nats.url],
        { timeoutMs: 20_000 },
      );
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("the cluster's NATS server must authenticate the gateways");
      expect(refused.stderr).toContain('--cluster-insecure-no-auth');
      expect(refused.stdout).not.toContain('gateway: ');
      const loud = started(['--cluster', nats.url, '--cluster-insecure-no-auth']);
      try {
        await loud.gw.line('cluster: ');
        expect(loud.gw.stderr()).toContain("WARNING: the cluster's NATS link is NOT authenticated");
      } finally {
        await loud.stop();
      }
    } finally {
      await nats.stop();
      state.cleanup();
    }
  });

  it('joins as a user with a password file; a wrong password (TETHER_CLUSTER_PASSWORD) is refused; config --print shows neither URL credentials nor TETHER_CLUSTER_TOKEN', async () => {
    const nats = await startNatsServer();
    const dir = makeTempDir('tether-secrets-');
    try {
      const passFile = join(dir.path, 'nats-password');
      writeFileSync(passFile, `${nats.pass}\n`, { mode: 0o600 });
      const byFile = started(['--cluster', nats.url, '--cluster-user', nats.user!, '--cluster-password-file', passFile]);
      try {
        expect(await byFile.gw.line('cluster: ')).toMatch(new RegExp(`^cluster: ${nats.url} `));
      } finally {
        await byFile.stop();
      }
      const wrong = await runTether(
        [
          'gateway',
          '--port',
          '0',
          '--grpc-port',
          'off',
          '--auth',
          'off',
          '--state-dir',
          dir.path,
          '--cluster',
          nats.url,
          '--cluster-user',
          nats.user!,
        ],
        {
          env: { TETHER_CLUSTER_PASSWORD: 'not-the-password' },
          timeoutMs: 20_000,
        },
      );
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/cannot reach the cluster's NATS server at nats:\/\/127\.0\.0\.1:\d+: .*Authorization Violation/i);
      const printed = await runTether(['config', '--print', '--program', 'gateway'], { env: { TETHER_CLUSTER: nats.authUrl } });
      expect(printed.stdout).not.toContain(nats.pass!);
      expect(printed.stdout).toContain('nats://[redacted]@127.0.0.1');
      const withToken = await runTether(['config', '--print', '--program', 'gateway'], {
        env: { TETHER_CLUSTER: nats.url, TETHER_CLUSTER_TOKEN: 'tok-secret-1' },
      });
      expect(withToken.stdout).toContain('clusterToken: "[redacted]"');
      expect(withToken.stdout).not.toContain('tok-secret-1');
    } finally {
      await nats.stop();
      dir.cleanup();
    }
  });

  it('joins over TLS with a client certificate signed by the CA NATS trusts; without one it is refused', async () => {
    const dir = makeTempDir('tether-nats-tls-');
    makeCerts(dir.path);
    const file = (f: string) => join(dir.path, f);
    const nats = await startNatsServer({
      auth: 'none',
      tls: { cert: file('server.crt'), key: file('server.key'), ca: file('test-ca.crt') },
    });
    try {
      expect(nats.url).toMatch(/^tls:/);
      const withCert = started([
        '--cluster',
        nats.url,
        '--cluster-tls-ca',
        file('test-ca.crt'),
        '--cluster-tls-cert',
        file('agent.crt'),
        '--cluster-tls-key',
        file('agent.key'),
      ]);
      try {
        const url = (await withCert.gw.line('gateway: ')).slice('gateway: '.length);
        expect(await withCert.gw.line('cluster: ')).toMatch(/^cluster: tls:\/\/127\.0\.0\.1:\d+ /);
        expect(await readyCluster(url)).toBe('ok');
      } finally {
        await withCert.stop();
      }
      const state = makeTempDir('tether-state-');
      try {
        const noCert = await runTether(
          [
            'gateway',
            '--port',
            '0',
            '--grpc-port',
            'off',
            '--auth',
            'off',
            '--state-dir',
            state.path,
            '--cluster',
            nats.url,
            '--cluster-tls-ca',
            file('test-ca.crt'),
            '--cluster-insecure-no-auth',
          ],
          {
            timeoutMs: 20_000,
          },
        );
        expect(noCert.code).toBe(1);
        expect(noCert.stderr).toContain("cannot reach the cluster's NATS server");
      } finally {
        state.cleanup();
      }
    } finally {
      await nats.stop();
      dir.cleanup();
    }
  });
});
