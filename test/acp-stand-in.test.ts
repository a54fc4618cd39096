import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { Policy } from '../core/policy/policy.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { isResult, until } from './support/items.js';
import { startStack } from './support/stack.js';

/** An ACP agent on the SDK's agent side that cannot load sessions (test/support/acp-stand-in.mjs), run with `--engine acp`. */
const STAND_IN = `${process.execPath} ${resolve('test/support/acp-stand-in.mjs')}`;

const errorOf = (p: Promise<unknown>) =>
  p.then(
    (r) => JSON.stringify(r),
    (e: Error) => e.message,
  );

describe('ACP engine: what it says and refuses (an agent without session/load)', () => {
  const cleanups = cleanupsPerTest();

  it('says at create that it cannot resume; answers a prompt; maps set_permission_mode to session/set_mode; refuses Claude-only requests and the SDK drop-in by name', async () => {
    const stack = cleanups.own(
      await startStack({ engine: ['acp'], engineCommand: STAND_IN, cwd: cleanups.tempDir('tether-acp-stand-in-').path }),
    );
    const client = await stack.client();
    const session = await client.createSession({ agent: 'test-agent' });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('hi there');
    await until(it, isResult, seen, 30_000, 'the result');
    const lines = seen.flatMap((i) => (i.kind === 'engine' ? [i.message as Record<string, unknown>] : []));
    expect(lines).toContainEqual(
      expect.objectContaining({ type: 'system', subtype: 'notice', message: expect.stringContaining('stand-in cannot load sessions') }),
    );
    expect(lines.find((l) => l.type === 'result')).toMatchObject({ is_error: false, result: 'echo: hi there' });

    expect(await errorOf(session.setPermissionMode('plan'))).toContain('"mode":"plan"');
    expect(await errorOf(session.setPermissionMode('acceptEdits'))).toContain(
      'mode acceptEdits is not one this ACP engine offers (default, plan)',
    );
    expect(await errorOf(session.setModel('opus'))).toContain('this ACP engine offers no model choice');
    expect(await errorOf(session.request('mcp_status'))).toContain('mcp_status is a Claude Code control request');

    // The SDK drop-in brings its own initialize: an ACP engine cannot take it.
    expect(await errorOf(client.createSession({ agent: 'test-agent', options: { client_initialize: true } }))).toContain(
      'engine "acp" speaks ACP: a client that brings its own initialize (the SDK drop-in tether-claude, remoteSpawn) needs the claude engine',
    );
  }, 90_000);

  it("answers the agent's terminal and file requests inside the session folder only, under the policy", async () => {
    const cwd = cleanups.tempDir('tether-acp-stand-in-').path;
    const policy = new StaticPolicy(Policy.compile({ permissions: { deny: ['Bash(rm *)'], ask: [], allow: [] } }));
    const stack = cleanups.own(await startStack({ engine: ['acp'], engineCommand: STAND_IN, cwd, policy }));
    const session = await (await stack.client()).createSession({ agent: 'test-agent' });
    const it = session[Symbol.asyncIterator]();
    const reply = async (prompt: string) => {
      await session.sendUserMessage(prompt);
      const r = await until(it, isResult, [], 30_000, `the answer to ${prompt}`);
      return String((r as { message: Record<string, unknown> }).message.result);
    };
    expect(await reply('run: echo made > t.txt && cat t.txt')).toBe('exit 0: made\n');
    expect(readFileSync(join(cwd, 't.txt'), 'utf8')).toBe('made\n');
    expect(await reply(`read: ${join(cwd, 't.txt')}`)).toBe('read: made\n');
    expect(await reply('read: /etc/hostname')).toContain('is outside the session folder');
    symlinkSync('/etc', join(cwd, 'out'));
    expect(await reply(`read: ${join(cwd, 'out', 'hostname')}`)).toContain('is outside the session folder');
    expect(await reply('run: rm t.txt')).toContain('refused: Tether policy: deny rule Bash(rm *)');
    expect(existsSync(join(cwd, 't.txt'))).toBe(true);
  }, 90_000);

  it('a queued prompt is withdrawn before it reaches the agent; interrupt is session/cancel and the turn ends cancelled', async () => {
    const stack = cleanups.own(
      await startStack({ engine: ['acp'], engineCommand: STAND_IN, cwd: cleanups.tempDir('tether-acp-stand-in-').path }),
    );
    const session = await (await stack.client()).createSession({ agent: 'test-agent' });
    const it = session[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await session.sendUserMessage('wait: 60000');
    const line = (i: SessionItem) => (i.kind === 'engine' ? (i.message as Record<string, unknown>) : {});
    await until(it, (i) => line(i).type === 'command_lifecycle' && line(i).state === 'started', seen, 20_000, 'the long turn to start');
    const { uuid } = await session.send('never answered');
    await until(it, (i) => line(i).type === 'command_lifecycle' && line(i).command_uuid === uuid, seen, 20_000, 'the second prompt queued');
    await session.withdraw(uuid);
    await session.interrupt();
    const result = await until(it, isResult, seen, 20_000, 'the cancelled turn');
    expect((result as { message: Record<string, unknown> }).message).toMatchObject({
      is_error: true,
      terminal_reason: 'aborted_streaming',
    });
    const lifecycle = seen.flatMap((i) => (line(i).command_uuid === uuid ? [line(i).state] : []));
    expect(lifecycle).toEqual(['queued', 'cancelled']);
    await session.sendUserMessage('after');
    const next = await until(it, isResult, seen, 20_000, 'the next turn');
    expect((next as { message: Record<string, unknown> }).message.result).toBe('echo: after');
    expect(seen.some((i) => i.kind === 'engine' && JSON.stringify(i.message).includes('echo: never answered'))).toBe(false);
  }, 90_000);
});
