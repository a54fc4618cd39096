/**
 * A reconnect storm (threat B13): 20 agents (one demo-engine session each) and 200 clients
 * (10 attached to each session) all lose a gateway that is killed and restarted on the same
 * port and state folder. Everyone comes back on their own jittered backoff
 * (core/util/backoff.ts), meeting no refusal but retryable ones, and every session is whole
 * again: its agent bound, its ten clients attached. The time from the new gateway listening
 * to the last one resumed is reported.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { RemoteSession } from '../client/remote-session.js';
import { loadKeyFile } from '../core/auth/keys.js';
import { mintToken } from '../core/auth/mint.js';
import { stateKeyPath } from '../core/auth/state-dir.js';
import type { TetherError } from '../core/errors.js';
import type { LinkStatus } from '../core/link/link.js';
import { makeTempDir } from './support/claude-cli.js';
import { startTether, type Daemon } from './support/cli.js';
import { isResult, until } from './support/items.js';
import { waitFor } from './support/wait.js';

const AGENTS = 20;
const CLIENTS_PER_SESSION = 10;

describe('reconnect storm', () => {
  const state = makeTempDir('tether-storm-state-');
  const cwd = makeTempDir('tether-storm-cwd-');
  let gw: Daemon | undefined;
  const agents: Agent[] = [];
  const clients: GatewayClient[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(agents.map((a) => a.shutdown(1_000)));
    await gw?.stop('SIGKILL');
    state.cleanup();
    cwd.cleanup();
  });

  it(`${AGENTS} agents and ${AGENTS * CLIENTS_PER_SESSION} clients all resume after a gateway restart, with only retryable refusals`, {
    timeout: 180_000,
  }, async () => {
    const boot = async (port: number) => {
      gw = startTether(['gateway', '--port', String(port), '--grpc-port', 'off', '--state-dir', state.path, '--log-level', 'warn']);
      return (await gw.line('gateway: ', 20_000)).slice('gateway: '.length);
    };
    const url = await boot(0);
    const key = loadKeyFile(stateKeyPath(state.path));
    const mint = (kind: 'agent' | 'client', sub: string) => mintToken({ key, kind, sub, ttlSeconds: 3600 });

    // Who is up, and every refusal met after the restart.
    let restarted = false;
    const fatal: TetherError[] = []; // refusals a retry cannot help: none allowed
    const retryable: TetherError[] = []; // refusals other than the connection failing (e.g. a cap's 503): reported
    const closedForGood: string[] = [];
    const up = new Set<string>();
    let lastResumedAt = 0;
    const track = (who: string) => (s: LinkStatus) => {
      if (s.state === 'connected') {
        up.add(who);
        if (restarted) lastResumedAt = Date.now();
      } else up.delete(who);
      if (s.state === 'down' && restarted && !s.error.retryable) fatal.push(s.error);
      else if (s.state === 'down' && restarted && !/cannot connect|link lost/.test(s.error.message)) retryable.push(s.error);
      if (s.state === 'closed') closedForGood.push(`${who}: ${s.error?.message ?? 'closed'}`);
    };

    for (let i = 0; i < AGENTS; i++) {
      const name = `storm-${i}`;
      const agent = new Agent({
        gateway: url,
        name,
        token: await mint('agent', name),
        engine: 'demo',
        cwd: cwd.path,
        eofGraceMs: 1_000,
        termGraceMs: 1_000,
        onStatus: track(name),
      });
      agents.push(agent);
    }
    await Promise.all(agents.map((a) => a.start()));

    const sessions: RemoteSession[] = [];
    for (let i = 0; i < AGENTS; i++) {
      const token = await mint('client', `user-${i}`);
      for (let j = 0; j < CLIENTS_PER_SESSION; j++) {
        const client = await GatewayClient.connect({ gateway: url, token, reconnectWaitMs: 60_000, onStatus: track(`client-${i}-${j}`) });
        clients.push(client);
        if (j === 0) {
          const s = await client.createSession({ agent: `storm-${i}` });
          sessions.push(s);
          await s.sendUserMessage('before the storm');
          await until(s[Symbol.asyncIterator](), isResult, [], 30_000, `session ${i}'s first turn`);
        } else {
          await client.attach(sessions[i].id);
        }
      }
    }
    const everyone = AGENTS + AGENTS * CLIENTS_PER_SESSION;
    expect(up.size).toBe(everyone);

    // The storm: the gateway dies without a word and comes back on the same port and state.
    const port = Number(new URL(url).port);
    await gw!.stop('SIGKILL');
    await waitFor(() => up.size === 0, 30_000, 'every link to notice the gateway is gone');
    restarted = true;
    await boot(port);
    const listeningAt = Date.now();
    await waitFor(
      () => up.size >= everyone,
      60_000,
      () => `all ${everyone} links back (up: ${up.size})`,
    );
    const storm = lastResumedAt - listeningAt;
    console.log(
      `[storm] ${AGENTS} agents + ${AGENTS * CLIENTS_PER_SESSION} clients: last one resumed ${storm} ms after the restarted gateway listened; retryable refusals other than a failed connect: ${retryable.length}${retryable.length ? ` (${[...new Set(retryable.map((e) => e.message))].slice(0, 3).join('; ')})` : ''}`,
    );

    expect(closedForGood).toEqual([]);
    expect(fatal.map((e) => `${e.code}: ${e.message}`)).toEqual([]);
    // Every session is whole again: its agent bound and its ten clients attached.
    const observer = await GatewayClient.connect({
      gateway: url,
      token: await mintToken({ key, kind: 'client', sub: 'ops', scopes: ['view', 'admin'], ttlSeconds: 600 }),
      reconnect: false,
    });
    clients.push(observer);
    const listed = await observer.listSessions();
    const mine = listed.filter((s) => sessions.some((x) => x.id === s.id));
    expect(mine).toHaveLength(AGENTS);
    for (const s of mine) {
      expect(s.state).not.toBe('agent-lost');
      expect(s.state).not.toBe('ended');
      expect(s.clients).toHaveLength(CLIENTS_PER_SESSION);
    }
    // And each still works end to end.
    const results = await Promise.all(
      sessions.map(async (s, i) => {
        await s.sendUserMessage(`after the storm ${i}`);
        return until(s[Symbol.asyncIterator](), isResult, [], 30_000, `session ${i}'s turn after the storm`);
      }),
    );
    expect(results).toHaveLength(AGENTS);
  });
});
