import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintToken } from '../core/auth/mint.js';
import { mintLoginCode } from '../core/auth/login-codes.js';
import { ATTACH_MEMBERS_LISTED } from '../core/protocol/methods.js';
import { TerminalClient } from '../client/terminal-client.js';
import type { RemoteSession } from '../client/remote-session.js';
import { signInUrl } from '../bin/sign-in-link.js';
import { launchChromium, openFromDashboard, person } from './support/browser.js';
import { startStack, type Stack } from './support/stack.js';
import { hasTool } from './support/tools.js';
import { waitFor } from './support/wait.js';

/** Members past the attach answer's list: alice (the owner) and MEMBERS named teammates. */
const MEMBERS = ATTACH_MEMBERS_LISTED + 4;
const nameOf = (n: number) => `Member ${n}`;

/**
 * The attach answer lists at most ATTACH_MEMBERS_LISTED members and says how many there are
 * (`client_count`); each of our clients that shows members asks `session.info` for the rest:
 * the library (`members()`), the terminal (names in its lines), the web page ("Here:").
 */
describe('attach answer: a count and the first members; everyone on request', () => {
  let stack: Stack;
  let owner: RemoteSession;
  let members: RemoteSession[];

  beforeAll(async () => {
    stack = await startStack({ engine: 'demo', limits: { maxMembers: 64 } });
    owner = await (await stack.client({ sub: 'alice' })).createSession({ agent: 'test-agent' });
    members = [];
    // One after another: the order the gateway lists them in is the order they came.
    for (let n = 1; n <= MEMBERS; n++) {
      const token = await mintToken({ key: stack.key!, kind: 'client', sub: `m${n}`, name: nameOf(n), ttlSeconds: 600 });
      members.push(await (await stack.client({ token })).attach(owner.id));
    }
  }, 60_000);
  afterAll(() => stack?.stop());

  it('lists the earliest ATTACH_MEMBERS_LISTED with client_count; the library’s members() gives everyone', async () => {
    const last = members[MEMBERS - 1];
    expect(last.info.client_count).toBe(MEMBERS + 1);
    expect(last.info.clients.map((c) => c.client_id)).toEqual([
      owner.clientId,
      ...members.slice(0, ATTACH_MEMBERS_LISTED - 1).map((m) => m.clientId),
    ]);
    const all = await last.members();
    expect(all.map((c) => c.client_id)).toEqual([owner.clientId, ...members.map((m) => m.clientId)]);
    expect(all.at(-1)).toMatchObject({ principal: `m${MEMBERS}`, name: nameOf(MEMBERS) });
    expect(last.info.clients).toHaveLength(MEMBERS + 1); // kept: asked once
    // An answer that listed everyone needs no question.
    expect(await owner.members()).toBe(owner.info.clients);
    // session.info itself always lists everyone.
    expect((await (await stack.client()).getSession(owner.id)).clients).toHaveLength(MEMBERS + 1);
  });

  it('the terminal names a member the attach answer did not list', async () => {
    const n = MEMBERS - 1; // past the list
    await members[n - 1].send(`hello from ${n}`);
    // From the prompt on (presence changes held back are numbered before it): the presence events that named the members are not replayed.
    let fromSeq = 0;
    for await (const item of members[n - 1])
      if (item.kind === 'event' && item.event.subtype === 'prompt') {
        fromSeq = item.seq;
        break;
      }
    const zed = await (await stack.client({ sub: 'zed' })).attach(owner.id, { readOnly: true, fromSeq });
    expect(zed.info.clients.some((c) => c.principal === `m${n}`)).toBe(false);
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = '';
    output.on('data', (b: Buffer) => (printed += b.toString()));
    const done = new TerminalClient(zed, { input, output, tty: false, self: 'zed' }).run();
    await waitFor(
      () => printed.includes(`${nameOf(n)}> hello from ${n}`),
      15_000,
      () => `the terminal to name member ${n}; it printed:\n${printed}`,
    );
    input.write('/quit\n');
    await expect(done).resolves.toBe(0);
  }, 30_000);

  it.skipIf(!hasTool('chromium'))(
    'web page: shows everyone under "Here:", not only the members the attach answer listed',
    async () => {
      const browser = await launchChromium();
      try {
        const bob = await person(browser);
        await bob.page.goto(signInUrl(stack.server.pageUrl, await mintLoginCode(stack.key!, { sub: 'bob' })));
        await bob.page.getByTestId('principal').waitFor();
        await openFromDashboard(bob.page, owner.id, 'Watch');
        const here = bob.page.getByTestId('presence');
        await here.filter({ hasText: `${nameOf(MEMBERS)} (controller)` }).waitFor();
        const text = (await here.textContent()) ?? '';
        for (let n = 1; n <= MEMBERS; n++) expect(text).toContain(`${nameOf(n)} (controller)`);
        expect(text).toContain('alice (owner)');
        expect(bob.errors).toEqual([]);
        await bob.context.close();
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
