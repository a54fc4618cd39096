import { generateKeyPairSync } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { hostKeyProof, loadOrCreateHostKey, verifyHostKeyProof } from '../core/auth/host-key.js';
import { asTetherError } from '../core/errors.js';
import { HostKeyPins } from '../gateway/door/host-key-pins.js';
import { thrownBy } from './support/thrown.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startStack, withTimeout, type Stack } from './support/stack.js';
import { readTurn } from './support/turns.js';

/** Issue 13, finding 5: a leaked agent token alone cannot register as, or supersede, the agent. */
const newKey = () => generateKeyPairSync('ed25519').privateKey;

describe('host key pins', () => {
  const dirs: TempDir[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => d.cleanup()));

  it('pin the first key per identity; the same key passes, another key or none is PERMISSION_DENIED', () => {
    const pins = new HostKeyPins();
    const [real, other] = [newKey(), newKey()];
    expect(pins.check('buildbox', 'buildbox', undefined)).toBeUndefined(); // no key, no pin: as before
    const fp = pins.check('buildbox', 'buildbox', hostKeyProof(real, 'buildbox'));
    expect(fp).toMatch(/^SHA256:/);
    expect(pins.check('buildbox', 'buildbox', hostKeyProof(real, 'buildbox'))).toBe(fp);
    for (const proof of [undefined, hostKeyProof(other, 'buildbox')]) {
      const err = thrownBy(() => pins.check('buildbox', 'buildbox', proof))!;
      expect(err.code).toBe('PERMISSION_DENIED');
      expect(err.message).toContain(fp);
    }
    expect(pins.check('other-sub', 'buildbox', hostKeyProof(other, 'buildbox'))).not.toBe(fp); // another identity, its own pin
  });

  it('refuses a proof for another name, a stale one and a forged signature', () => {
    const key = newKey();
    const now = Date.now();
    expect(() => verifyHostKeyProof(hostKeyProof(key, 'a', now), 'b', now)).toThrow(/does not verify/);
    expect(() => verifyHostKeyProof(hostKeyProof(key, 'a', now - 10 * 60_000), 'a', now)).toThrow(/off the gateway's clock/);
    const forged = { ...hostKeyProof(key, 'a', now), public_key: hostKeyProof(newKey(), 'a', now).public_key };
    expect(() => verifyHostKeyProof(forged, 'a', now)).toThrow(/does not verify/);
  });

  it("keep pins in a 0600 file across restarts; the agent's key file is 0600 and reused", () => {
    const dir = makeTempDir('tether-pins-');
    dirs.push(dir);
    const path = join(dir.path, 'agent-host-keys.json');
    const keyPath = join(dir.path, 'agent', 'host-key.pem');
    const first = loadOrCreateHostKey(keyPath);
    expect(first.created).toBe(true);
    expect(statSync(keyPath).mode & 0o777).toBe(0o600);
    expect(loadOrCreateHostKey(keyPath).created).toBe(false);
    new HostKeyPins(path).check('box', 'box', hostKeyProof(first.key, 'box'));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const restarted = new HostKeyPins(path);
    expect(thrownBy(() => restarted.check('box', 'box', hostKeyProof(newKey(), 'box')))!.code).toBe('PERMISSION_DENIED');
    expect(restarted.check('box', 'box', hostKeyProof(loadOrCreateHostKey(keyPath).key, 'box'))).toMatch(/^SHA256:/);
  });
});

describe.each(['ws', 'grpc'] as const)("an impostor with the agent's own token, over %s", (transport) => {
  let stack: Stack | undefined;
  const impostors: Agent[] = [];
  afterEach(async () => {
    await Promise.all(impostors.splice(0).map((a) => a.shutdown(500).catch(() => {})));
    await stack?.stop();
    stack = undefined;
  });

  it('is refused with PERMISSION_DENIED, and the real agent keeps its link and its sessions', async () => {
    stack = await startStack({ engine: 'demo', agentTransport: transport });
    // The real agent runs with this token and its own host key; the impostor gets the token.
    await stack.agent.shutdown(500); // the stack's own agent: replaced by one whose token the test holds
    const token = await stack.mint({ kind: 'agent', sub: 'test-agent' });
    const real = new Agent({
      gateway: transport === 'grpc' ? stack.grpcUrl : stack.wsUrl,
      name: 'test-agent',
      token,
      engine: 'demo',
      hostKey: newKey(),
      eofGraceMs: 500,
      termGraceMs: 500,
    });
    impostors.push(real); // stopped in teardown like the others
    await real.start();
    const client = await stack.client();
    const session = await client.createSession({ agent: 'test-agent' });

    for (const hostKey of [undefined, newKey()]) {
      const impostor = new Agent({
        gateway: transport === 'grpc' ? stack.grpcUrl : stack.wsUrl,
        name: 'test-agent',
        token,
        engine: 'demo',
        hostKey,
      });
      impostors.push(impostor);
      const err = await withTimeout(
        impostor.start().then(
          () => undefined,
          (e: unknown) => asTetherError(e),
        ),
        10_000,
        "the impostor's hello",
      );
      expect(err?.code, hostKey ? 'a different host key' : 'no host key').toBe('PERMISSION_DENIED');
      expect(err?.message).toContain('bound to host key');
    }

    // The real agent is still the one registered, and its session still runs a turn.
    expect((await client.listAgents()).filter((a) => a.name === 'test-agent')).toHaveLength(1);
    expect(real.sessionCount).toBe(1);
    await session.sendUserMessage('hello');
    const turn = await withTimeout(
      readTurn(session, () => ({ behavior: 'deny', message: 'no' })),
      20_000,
      'a turn on the real agent',
    );
    expect(turn.result.is_error).toBe(false);
  });
});
