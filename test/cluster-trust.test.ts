/**
 * Issue 27, items 8 and 9: the cluster's fabric has a door. A real nats-server runs on the
 * NATS permissions of deploy/nats-cluster.conf; two `tether gateway --cluster` processes
 * authenticate to it as an operator sets them up; the agent runs the real Claude Code CLI
 * against the scripted fake Messages API. A client of NATS holding the gateways' own NATS
 * password, but not their token key, tries what a gateway may do; revocations and host-key
 * pins made through one gateway hold on the other.
 */
import { generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { Agent } from '../agent/agent.js';
import { asPermissionRequest } from '../client/permission-policy.js';
import type { SessionItem } from '../client/remote-session.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { LinkStatus } from '../core/link/link.js';
import { asTetherError, type TetherError } from '../core/errors.js';
import { encodeLineFrame } from '../core/wire/session-frame.js';
import { addRevocation, RevocationList } from '../gateway/door/revocations.js';
import { generateTokenKey } from '../core/auth/keygen.js';
import { silentLogger } from '../core/logging.js';
import { FabricMac } from '../gateway/cluster/fabric-mac.js';
import { natsDialOf } from '../gateway/cluster/nats-auth.js';
import { NatsLink } from '../gateway/cluster/nats-link.js';
import { SharedTrust } from '../gateway/cluster/shared-trust.js';
import { makeTempDir } from './support/claude-cli.js';
import { frameRecord } from '../gateway/session/session-store.js';
import { BASH_TURN, DEPLOYED_NATS, startClusterStack, type ClusterGateway, type ClusterStack } from './support/cluster-stack.js';
import { isCanUseTool, isResult, until } from './support/items.js';
import { withTimeout } from './support/stack.js';
import { waitFor } from './support/wait.js';
import { hasTool } from './support/tools.js';

const TEARDOWN_MS = 90_000;
/** A principal that may do anything, as a gateway would describe an admin's. */
const ADMIN = { sub: 'root', kind: 'client', canCreate: true, canControl: true, canAdmin: true } as const;
const FORGED_TEXT = 'FORGED-BY-A-NON-GATEWAY';

const seqsOf = (items: SessionItem[]) => items.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);

describe.skipIf(!hasTool('nats-server'))("the cluster's fabric (issue 27, items 8 and 9)", () => {
  let stack: ClusterStack;
  const realKey = generateKeyPairSync('ed25519').privateKey;
  beforeAll(async () => {
    stack = await startClusterStack({
      gateways: 2,
      scenario: BASH_TURN,
      nats: DEPLOYED_NATS,
      agentHostKey: realKey,
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  }, TEARDOWN_MS);
  const dumpLogsOnFailure = () =>
    onTestFailed(() => {
      for (const g of stack.gateways) process.stderr.write(`--- ${g.id} (${g.url})\n${g.daemon.stderr()}\n`);
    });

  it('a client of NATS without credentials is refused by the server', async () => {
    const err = await connect({ servers: stack.nats.url.replace('nats://', ''), timeout: 5_000, reconnect: false }).then(
      (nc) => nc.close().then(() => undefined),
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/Authorization Violation/i);
  });

  it("a client of NATS with the gateways' NATS password but not their key: its forged create, prompt answer and release are dropped, its frame never reaches clients", async () => {
    dumpLogsOnFailure();
    const [home, other] = stack.gateways;
    const forger: NatsConnection = await connect({
      servers: stack.nats.url.replace('nats://', ''),
      user: stack.nats.user,
      pass: stack.nats.pass,
      timeout: 5_000,
    });
    try {
      const call = (gateway: string, verb: string, body: unknown) =>
        forger.request(`tether.gw.${gateway}.${verb}`, JSON.stringify(body), { timeout: 2_000 });
      const caller = { principal: ADMIN, client_id: 'forged-client', transport: 'ws', gateway: other.id };

      // A session created by an admin principal on the agent's gateway: no answer, no session.
      await expect(call(home.id, 'call', { method: 'session.create', params: { agent: 'builder' }, caller })).rejects.toThrow();
      expect(stack.agent.sessionCount).toBe(0);

      // Alice, on the other gateway, runs a turn on a session held by the agent's gateway.
      const alice = await stack.client(1, 'alice');
      const s = await alice.createSession({ agent: 'builder' });
      const it = s[Symbol.asyncIterator]();
      const seen: SessionItem[] = [];
      await s.sendUserMessage('append a line');
      const prompt = await until(it, isCanUseTool, seen, 30_000, 'the permission prompt');
      const ask = asPermissionRequest((prompt as { message: Record<string, unknown> }).message)!;

      // The forger answers the prompt as the admin: not acted on.
      const allow = JSON.stringify({
        type: 'control_response',
        response: { subtype: 'success', request_id: ask.requestId, response: { behavior: 'allow', updatedInput: ask.input } },
      });
      await expect(
        call(home.id, 'call', { method: 'session.send', params: { session_id: s.id, input_id: 'forged-1', line: allow }, caller }),
      ).rejects.toThrow();
      await s.answer(ask.requestId, { behavior: 'deny', message: 'no' });
      await until(it, isResult, seen, 30_000, 'the result of the denied turn');
      expect(existsSync(join(stack.cwd, 'made.txt'))).toBe(false);

      // It asks the home to let go of the live session, and appends the next frame to its log.
      await expect(call(home.id, 'release', { session_id: s.id, to: 'gw-forger' })).rejects.toThrow();
      const next = Math.max(...seqsOf(seen)) + 1;
      const line = JSON.stringify({ type: 'assistant', message: { role: 'assistant', content: [{ type: 'text', text: FORGED_TEXT }] } });
      const forgedFrame = frameRecord({ seq: next, agentSeq: next, bytes: encodeLineFrame(s.id, next, 'engine', Buffer.from(line)) });
      await jetstream(forger).publish(`tether.s.${s.id}`, forgedFrame);
      await waitFor(
        () => other.daemon.stderr().includes('dropping a session log message no gateway wrote'),
        10_000,
        "the other gateway's mirror to drop the forged frame",
      );

      // The session is still held and runs; Alice sees the real turn and never the forged frame.
      await s.sendUserMessage('hello again');
      await until(it, isResult, seen, 30_000, 'the result of the next turn');
      expect(JSON.stringify(seen)).not.toContain(FORGED_TEXT);
      seqsOf(seen).forEach((v, n, all) => n && expect(v).toBe(all[n - 1] + 1));
      expect(stack.agent.sessionCount).toBe(1);
      expect(home.daemon.stderr()).toContain('dropping a call no gateway sent');
    } finally {
      await forger.close();
    }
  }, 120_000);

  it('tether revoke through one gateway cuts the subject on the other within a second, and the other refuses it after', async () => {
    dumpLogsOnFailure();
    const [first, second] = stack.gateways;
    const token = await stack.token('mallory');
    let ended!: (e: TetherError | undefined) => void;
    const closed = new Promise<TetherError | undefined>((r) => (ended = r));
    const onStatus = (st: LinkStatus) => st.state === 'closed' && ended(st.error);
    const mallory = await GatewayClient.connect({ gateway: second.url, token, reconnect: false, onStatus });
    const bob = await stack.client(1, 'bob');
    try {
      const t0 = Date.now();
      addRevocation(first.stateDir, { sub: 'mallory', reason: 'left the team' });
      const err = await withTimeout(closed, 1_000, 'the revocation to close the connection on the other gateway (within a second)');
      process.stdout.write(`cluster revocation: closed on the other gateway after ${Date.now() - t0} ms\n`);
      expect(err?.code).toBe('PERMISSION_DENIED');
      expect(err?.message).toContain('token revoked');
      const again = await GatewayClient.connect({ gateway: second.url, token, reconnect: false }).then(
        (c) => c.close().then(() => undefined),
        (e: unknown) => asTetherError(e),
      );
      expect(again?.code).toBe('PERMISSION_DENIED');
      expect((await bob.listAgents()).map((a) => a.name)).toEqual(['builder']); // others untouched
    } finally {
      await mallory.close();
    }
  }, 60_000);

  it('a browser signed in on one gateway stays signed in on the other (a fail-over keeps it); a sign-out on either ends it on both', async () => {
    dumpLogsOnFailure();
    const [first, second] = stack.gateways;
    const page = (g: ClusterGateway) => g.url.replace(/^ws:/, 'http:');
    const signedIn = await fetch(`${page(first)}/v1/login`, {
      method: 'POST',
      headers: { origin: page(first) },
      body: JSON.stringify({ code: await stack.loginCode('alice') }),
    });
    expect(signedIn.status).toBe(200);
    const cookie = /__Host-tether_session=([^;]+)/.exec(signedIn.headers.get('set-cookie') ?? '')?.[1];
    expect(cookie).toBeDefined();
    const ticket = (g: ClusterGateway) =>
      fetch(`${page(g)}/v1/ticket`, { method: 'POST', headers: { origin: page(g), cookie: `__Host-tether_session=${cookie}` } });
    // The sign-in reaches the other gateway through the cluster's bucket (bounded wait: it is published, then watched).
    // Each refused try counts against this address's failed authentications (burst 40): try every 200 ms, not every 20.
    const deadline = Date.now() + 5_000;
    while ((await ticket(second)).status !== 200) {
      if (Date.now() > deadline) throw new Error('timed out after 5000 ms waiting for the other gateway to know the browser sign-in');
      await new Promise((r) => setTimeout(r, 200));
    }
    const out = await fetch(`${page(second)}/v1/logout`, {
      method: 'POST',
      headers: { origin: page(second), cookie: `__Host-tether_session=${cookie}` },
    });
    expect(out.status).toBe(204);
    await waitFor(async () => (await ticket(first)).status === 401, 5_000, 'the sign-out on one gateway to end the sign-in on the other');
  }, 60_000);

  it("an impostor with the agent's token and another host key is refused by the other gateway; the real agent keeps its session", async () => {
    dumpLogsOnFailure();
    const [first, second] = stack.gateways;
    const alice = await stack.client(1, 'alice');
    const s = await alice.createSession({ agent: 'builder' });
    for (const hostKey of [generateKeyPairSync('ed25519').privateKey, undefined]) {
      const impostor = new Agent({
        gateway: second.url,
        name: 'builder',
        token: await stack.agentToken('builder'),
        engine: 'demo',
        hostKey,
      });
      try {
        const err = await withTimeout(
          impostor.start().then(
            () => undefined,
            (e: unknown) => asTetherError(e),
          ),
          10_000,
          "the impostor's hello",
        );
        expect(err?.code, hostKey ? 'another host key' : 'no host key').toBe('PERMISSION_DENIED');
        expect(err?.message).toContain('bound to host key');
      } finally {
        await impostor.shutdown(500).catch(() => {});
      }
    }
    expect((await alice.listAgents()).map((a) => [a.name, a.gateway])).toEqual([['builder', first.id]]);
    const it = s[Symbol.asyncIterator]();
    await s.sendUserMessage('hello');
    await until(it, isResult, [], 30_000, 'a turn on the real agent');
  }, 60_000);

  it('a gateway joining later has every earlier revocation of the cluster before it listens, and a pin claimed first wins', async () => {
    const dial = natsDialOf({
      cluster: stack.nats.url,
      clusterUser: stack.nats.user,
      clusterPassword: stack.nats.pass,
      clusterInsecureNoAuth: false,
    });
    const mac = FabricMac.fromTokenKey(generateTokenKey('HS256').key); // its own cluster: the stack's gateways' entries are not its
    const dirs = [makeTempDir('tether-rev-a-'), makeTempDir('tether-rev-b-')];
    const links = [await NatsLink.open(dial, 'test-a', silentLogger), await NatsLink.open(dial, 'test-b', silentLogger)];
    const lists = dirs.map((d) => RevocationList.inStateDir(d.path));
    try {
      const [a, b] = await Promise.all(links.map((l) => SharedTrust.open(l, mac, silentLogger)));
      const issuedAt = new Date(Date.now() - 60_000);
      for (let n = 0; n < 50; n++) addRevocation(dirs[0].path, { jti: `jti-${n}` });
      addRevocation(dirs[0].path, { sub: 'eve' });
      lists[0].reload();
      await a.shareRevocations(lists[0]);
      await b.shareRevocations(lists[1]); // resolves once it read the bucket
      for (const jti of ['jti-0', 'jti-49']) expect(lists[1].match({ sub: 'x', jti, issuedAt })?.jti).toBe(jti);
      expect(lists[1].match({ sub: 'eve', jti: 'other', issuedAt })?.sub).toBe('eve');
      expect(lists[1].match({ sub: 'x', jti: 'jti-50', issuedAt })).toBeUndefined();
      // Two gateways pin the same identity with different keys at once: one key wins on both.
      const [first, second] = await Promise.all([a.claim('probe/probe', 'SHA256:aaa'), b.claim('probe/probe', 'SHA256:bbb')]);
      expect(first).toBe(second);
      expect(await b.pinOf('probe/probe')).toBe(first);
      a.close();
      b.close();
    } finally {
      lists.forEach((l) => l.close());
      await Promise.all(links.map((l) => l.close()));
      dirs.forEach((d) => d.cleanup());
    }
  });
});
