import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { TetherError } from '../core/errors.js';
import { Gateway } from '../gateway/gateway.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { makeCerts, type TestCerts } from './support/certs.js';
import { runTether, startTether } from './support/cli.js';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { rejectionOf } from './support/items.js';
import { waitFor } from './support/wait.js';

let dir: TempDir;
let certs: TestCerts;
beforeAll(() => {
  dir = makeTempDir('tether-certs-');
  certs = makeCerts(dir.path);
});
afterAll(() => dir.cleanup());

/** TLS on both transports with certificates made in the test (no private keys committed). */
describe.each(['ws', 'grpc'] as const)('TLS over %s', (transport) => {
  let server: GatewayServer | undefined;
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
    await server?.close();
    server = undefined;
  });

  const urlOf = (s: GatewayServer) => (transport === 'ws' ? s.url : s.grpcUrl!);

  it('a client trusting the CA connects; one without it fails with a clear error', async () => {
    server = await startGatewayServer(new Gateway(), { port: 0, grpcPort: 0, tls: { cert: certs.serverCert, key: certs.serverKey } });
    const url = urlOf(server);
    expect(url).toMatch(transport === 'ws' ? /^wss:\/\// : /^grpcs:\/\//);
    const ok = await GatewayClient.connect({ gateway: url, dial: { ca: certs.ca } });
    closers.push(() => ok.close());
    expect(await ok.listAgents()).toEqual([]);

    const err = await rejectionOf(GatewayClient.connect({ gateway: url, dial: { connectTimeoutMs: 3_000 } }));
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toMatch(transport === 'ws' ? /self.signed|unable to verify|certificate/i : /connect|certificate|deadline/i);
  });

  it('with mutual TLS an agent without a client certificate is refused; with one it registers', async () => {
    server = await startGatewayServer(new Gateway(), {
      port: 0,
      grpcPort: 0,
      tls: { cert: certs.serverCert, key: certs.serverKey, clientCa: certs.ca },
    });
    const url = urlOf(server);
    // A daemon keeps retrying; what matters is that it is refused, with a reason, every time.
    const refusedWith = async (dial: Record<string, Buffer | number>, name: string) => {
      let firstError: TetherError | undefined;
      const agent = new Agent({
        gateway: url,
        name,
        engine: 'demo',
        dial: { ...dial, connectTimeoutMs: 3_000 },
        onStatus: (st) => {
          if (st.state === 'down') firstError ??= st.error;
        },
      });
      void agent.start().catch(() => {});
      await waitFor(() => firstError !== undefined, 10_000, 'the agent to report its first failure');
      await agent.shutdown(0);
      return firstError;
    };
    const noCert = await refusedWith({ ca: certs.ca }, 'no-cert');
    expect(noCert?.code).toBe('UNAVAILABLE');
    const stranger = await refusedWith({ ca: certs.ca, tlsCert: certs.otherClientCert, tlsKey: certs.otherClientKey }, 'stranger');
    expect(stranger?.code).toBe('UNAVAILABLE');
    expect(server.port).toBeGreaterThan(0);

    const good = new Agent({
      gateway: url,
      name: 'with-cert',
      engine: 'demo',
      dial: { ca: certs.ca, tlsCert: certs.clientCert, tlsKey: certs.clientKey },
    });
    await good.start();
    closers.push(() => good.shutdown(1_000));
    const client = await GatewayClient.connect({
      gateway: url,
      dial: { ca: certs.ca, tlsCert: certs.clientCert, tlsKey: certs.clientKey },
    });
    closers.push(() => client.close());
    expect((await client.listAgents()).map((a) => a.name)).toEqual(['with-cert']);
  });
});

describe('TLS from the command line', () => {
  it('tether gateway --tls-cert/--tls-key serves wss:// and grpcs://; clients pass --ca', async () => {
    const files = { cert: join(dir.path, 'server.crt'), key: join(dir.path, 'server.key'), ca: join(dir.path, 'test-ca.crt') };
    const state = join(dir.path, 'state');
    const gw = startTether(['gateway', '--port', '0', '--state-dir', state, '--tls-cert', files.cert, '--tls-key', files.key]);
    try {
      const wss = (await gw.line('gateway: ')).slice('gateway: '.length);
      const grpcs = (await gw.line('grpc: ')).slice('grpc: '.length);
      expect(wss).toMatch(/^wss:\/\//);
      expect(grpcs).toMatch(/^grpcs:\/\//);
      const token = (await runTether(['token', '--state-dir', state, '--role', 'client', '--sub', 'cli-user'])).stdout.trim();
      for (const url of [wss, grpcs]) {
        const ok = await runTether(['agents', '--gateway', url, '--token', token, '--ca', files.ca, '--json']);
        expect(ok.stderr).toBe('');
        expect(JSON.parse(ok.stdout)).toEqual([]);
      }
      const untrusted = await runTether(['agents', '--gateway', wss, '--token', token]);
      expect(untrusted.code).toBe(1);
      expect(untrusted.stderr).toMatch(/certificate/i);
      const badCa = await runTether(['agents', '--gateway', wss, '--token', token, '--ca', join(dir.path, 'nope.pem')]);
      expect(badCa.code).toBe(2);
      expect(badCa.stderr).toContain('cannot read --ca');
    } finally {
      await gw.stop();
    }
  });

  it('refuses a certificate without its key before opening a port', async () => {
    const r = await runTether([
      'gateway',
      '--port',
      '0',
      '--state-dir',
      join(dir.path, 'state2'),
      '--tls-cert',
      join(dir.path, 'server.crt'),
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('TLS needs both a certificate and its key');
    writeFileSync(join(dir.path, 'not-pem.txt'), 'hello');
    const r2 = await runTether([
      'gateway',
      '--port',
      '0',
      '--state-dir',
      join(dir.path, 'state2'),
      '--tls-cert',
      join(dir.path, 'not-pem.txt'),
      '--tls-key',
      join(dir.path, 'server.key'),
    ]);
    expect(r2.stderr).toContain('is not a PEM file');
  });
});
