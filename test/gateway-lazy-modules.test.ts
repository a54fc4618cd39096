/**
 * The gateway loads what only some gateways use when it is first used: the ACP SDK (≈2.7 MB of
 * heap, which every full garbage collection marks again) when an editor first connects at
 * `/acp`, and `/acp` then works as before; openid-client (≈0.9 MB) only for an OIDC sign-in;
 * NATS only in a cluster; web-push with the first push sent. A client command dialing ws://
 * loads no gRPC (grpc-js and protobufjs were a fifth of its start); `tether audit` reading the
 * trail offline loads neither jose nor prom-client (it took the gateway's whole config for a file name).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { runTether, startTether } from './support/cli.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor, withTimeout } from './support/wait.js';

const PROBE = fileURLToPath(new URL('./support/module-probe.mjs', import.meta.url));

describe('modules the gateway loads when first used', () => {
  const cleanups = cleanupsPerTest();

  it('the ACP SDK not until the first /acp connection, which then initializes; openid-client not without OIDC; NATS and web-push not at start; a ws:// client no gRPC; tether audit no jose or prom-client', async () => {
    const dir = cleanups.tempDir('tether-acp-lazy-');
    const probe = join(cleanups.tempDir('tether-acp-lazy-probe-').path, 'loaded.txt');
    const stateDir = cleanups.tempDir('tether-acp-lazy-state-').path;
    const env = {
      NODE_OPTIONS: `--import ${PROBE}`,
      TETHER_MODULE_PROBE_FILE: probe,
      TETHER_MODULE_PROBE_MATCH: '/@agentclientprotocol/,/openid-client/,/oauth4webapi/,/@nats-io/,/web-push/',
    };
    const up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', dir.path, '--state-dir', stateDir], { env });
    cleanups.push(() => up.stop());
    const url = (await up.line('gateway: ')).slice('gateway: '.length);
    const token = (await up.line('token: ')).slice('token: '.length);
    const loaded = () => (existsSync(probe) ? readFileSync(probe, 'utf8').trim().split('\n').filter(Boolean) : []);
    expect(loaded()).toEqual([]);

    // A client command over ws:// (the URL up printed) loads no gRPC module.
    const clientProbe = join(cleanups.tempDir('tether-client-lazy-probe-').path, 'loaded.txt');
    const list = await runTether(['sessions', '--gateway', url.replace(/^http/, 'ws'), '--token', token], {
      env: { NODE_OPTIONS: `--import ${PROBE}`, TETHER_MODULE_PROBE_FILE: clientProbe, TETHER_MODULE_PROBE_MATCH: '/@grpc/,/protobufjs/' },
    });
    expect(list.code, list.stderr).toBe(0);
    expect(existsSync(clientProbe) ? readFileSync(clientProbe, 'utf8') : '').toBe('');
    // Reading the trail offline loads neither the gateway's key handling nor its metrics.
    const auditProbe = join(cleanups.tempDir('tether-audit-lazy-probe-').path, 'loaded.txt');
    const trail = await runTether(['audit', '--state-dir', stateDir], {
      env: { NODE_OPTIONS: `--import ${PROBE}`, TETHER_MODULE_PROBE_FILE: auditProbe, TETHER_MODULE_PROBE_MATCH: '/jose/,/prom-client/' },
    });
    expect(trail.code, trail.stderr).toBe(0);
    expect(existsSync(auditProbe) ? readFileSync(auditProbe, 'utf8') : '').toBe('');

    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/acp`, { headers: { authorization: `Bearer ${token}` } });
    cleanups.push(() => ws.terminate());
    const answers: { id?: number; result?: { protocolVersion?: number } }[] = [];
    ws.on('message', (m) => answers.push(JSON.parse(m.toString())));
    await withTimeout(new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject)), 10_000, 'the /acp upgrade');
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } }));
    await waitFor(() => answers.some((a) => a.id === 1), 10_000, 'the initialize answer');
    expect(answers.find((a) => a.id === 1)?.result?.protocolVersion).toBe(1);
    expect(loaded().length).toBeGreaterThan(0);
    expect(loaded().every((url) => url.includes('/@agentclientprotocol/'))).toBe(true);
  }, 30_000);
});
