import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { SessionItem } from '../client/remote-session.js';
import { startRestartable, type RestartableStack } from './support/restartable-stack.js';
import { rejectionOf } from './support/items.js';
import { eventually, waitFor } from './support/wait.js';
import { runTether } from './support/cli.js';
import { titleFromPrompt } from '../core/protocol/titles.js';
import { factOf } from '../gateway/session/history/session-history.js';

/** Issue 33: a session's title is its first prompt until its owner (or its engine) names it; kept in its history. */
describe('session titles', () => {
  let stack: RestartableStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it('the first prompt titles the session; the owner renames it, a controller cannot, and the name survives a gateway restart', async () => {
    stack = await startRestartable();
    const alice = await stack.client('ws', 'alice');
    const bob = await stack.client('ws', 'bob');
    const mine = await alice.createSession({ agent: 'builder' });
    expect((await alice.getSession(mine.id)).title).toBeUndefined();
    await mine.sendUserMessage('  Fix the flaky\n   login test  ');
    const first = await eventually(
      () => alice.getSession(mine.id),
      (s) => s.title !== undefined,
      'the first prompt to title the session',
    );
    expect(first.title).toBe('Fix the flaky login test');
    await mine.sendUserMessage('a second prompt does not retitle it');

    const theirs = await bob.attach(mine.id);
    expect(theirs.role).toBe('controller');
    const refused = await rejectionOf(theirs.rename('bob was here'));
    expect(refused.code).toBe('PERMISSION_DENIED');
    expect(refused.message).toBe("only the session's owner (alice) may rename it");
    expect((await rejectionOf(mine.rename('   '))).code).toBe('INVALID_ARGUMENT');
    expect((await rejectionOf(mine.rename('x'.repeat(201)))).code).toBe('INVALID_ARGUMENT');

    const told = (async () => {
      for await (const item of theirs as AsyncIterable<SessionItem>)
        if (item.kind === 'event' && item.event.subtype === 'title_changed') return item.event;
    })();
    await mine.rename('Login test: flaky on CI');
    expect(await told).toMatchObject({ title: 'Login test: flaky on CI', by: 'alice' });
    expect((await bob.listSessions()).find((s) => s.id === mine.id)?.title).toBe('Login test: flaky on CI');
    const audit = await mine.audit();
    expect(audit.filter((r) => r.action === 'rename')).toEqual([
      expect.objectContaining({ principal: 'alice', title: 'Login test: flaky on CI' }),
    ]);

    await stack.restart();
    const again = await stack.client('ws', 'carol');
    expect((await again.getSession(mine.id)).title).toBe('Login test: flaky on CI');
    // `tether sessions` shows it in its TITLE column.
    const listed = await runTether(['sessions', '--gateway', stack.url('ws'), '--token', await stack.token('carol')], {
      timeoutMs: 30_000,
    });
    expect(listed.code, listed.stderr).toBe(0);
    const [head, row] = listed.stdout.split('\n');
    expect(head).toMatch(/^ID +TITLE +AGENT/);
    expect(row).toContain('Login test: flaky on CI');
  });

  it('the JSON-RPC dialect renames too (session_rename): the owner only, and session_list shows the title', async () => {
    stack = await startRestartable();
    const alice = await stack.client('ws', 'alice');
    const mine = await alice.createSession({ agent: 'builder' });
    const call = async (sub: string, method: string, params: unknown) => {
      const ws = new WebSocket(stack!.url('ws'), 'tether-jsonrpc.v1', { headers: { authorization: `Bearer ${await stack!.token(sub)}` } });
      try {
        await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
        const answers: Record<string, unknown>[] = [];
        ws.on('message', (d) => answers.push(JSON.parse(d.toString())));
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocol_version: '1.0' } }));
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method, params }));
        await waitFor(() => answers.some((a) => a.id === 2), 10_000, `the answer to ${method}`);
        return answers.find((a) => a.id === 2) as { result?: Record<string, unknown>; error?: { data?: { code?: string } } };
      } finally {
        ws.terminate();
      }
    };
    expect((await call('bob', 'session_rename', { session_id: mine.id, title: 'hijacked' })).error?.data?.code).toBe('PERMISSION_DENIED');
    expect((await call('alice', 'session_rename', { session_id: mine.id, title: 'From the dialect' })).result).toEqual({});
    const listed = (await call('alice', 'session_list', {})).result?.sessions as { session_id: string; title?: string }[];
    expect(listed).toEqual([expect.objectContaining({ session_id: mine.id, title: 'From the dialect' })]);
  });

  it("takes the real CLI's own title (its answer to rename_session), which only the owner may ask for", async () => {
    stack = await startRestartable({ engine: 'claude' });
    const alice = await stack.client('ws', 'alice');
    const bob = await stack.client('ws', 'bob');
    const mine = await alice.createSession({ agent: 'builder' });
    await mine.sendUserMessage('hello there');
    await eventually(
      () => alice.getSession(mine.id),
      (s) => s.title === 'hello there',
      'the first prompt to title the session',
      30_000,
    );
    const theirs = await bob.attach(mine.id);
    expect((await rejectionOf(theirs.request('rename_session', { title: 'not yours' }))).code).toBe('PERMISSION_DENIED');
    await mine.request('rename_session', { title: 'Named by the engine' });
    const named = await eventually(
      () => bob.getSession(mine.id),
      (s) => s.title === 'Named by the engine',
      "the engine's session_title_changed to title the session",
      30_000,
    );
    expect(named.title).toBe('Named by the engine');
  });

  it("reads the engine's own title (system/session_title_changed) from a stored frame, over the first prompt's", () => {
    const frame = (params: unknown) => Buffer.from(JSON.stringify({ method: 'session.frame', params }));
    expect(
      factOf(
        frame({
          session_id: 's',
          seq: 3,
          origin: 'engine',
          message: { type: 'system', subtype: 'session_title_changed', title: 'My session' },
        }),
      ),
    ).toEqual({ kind: 'title', title: 'My session' });
    expect(
      titleFromPrompt({ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image' }, { type: 'text', text: 'here' }] }),
    ).toBe('look here');
    const long = titleFromPrompt({ content: `${'word '.repeat(40)}end` })!;
    expect(long.length).toBeLessThanOrEqual(80);
    expect(long.endsWith('…')).toBe(true);
    expect(titleFromPrompt({ content: [{ type: 'image' }] })).toBeUndefined();
    // Whatever a client puts in a prompt, a title is made or not, never an exception.
    for (const odd of [null, 'text', 7, { content: null }, { content: [null, 3, 'x', { type: 'text', text: 5 }] }, { content: {} }])
      expect(titleFromPrompt(odd)).toBeUndefined();
  });
});
