/**
 * Issue 31, approval by someone else: the real Claude Code CLI with the scripted model, on
 * WebSocket and gRPC. Whose prompt caused a tool call decides who must approve it, and
 * neither the author's own Allow nor a session rule the author granted earlier lets it run.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { asPermissionRequest, proposedSessionRule, type PermissionRequest } from '../client/permission-policy.js';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { describeEvent } from '../client/terminal-render.js';
import { mayAnswer, promptTurnText } from '../client/turn-view.js';
import { Transcript, type Entry } from '../client/web/src/transcript.js';
import type { TetherEvent } from '../core/protocol/events.js';
import { Policy } from '../core/policy/policy.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import type { FakeResponse } from './support/fake-anthropic.js';
import { isCanUseTool, isResult, rejectionOf, until } from './support/items.js';

/** One turn in which the model runs `command` with Bash, then says it is done. */
const bashTurn = (id: string, command: string): FakeResponse[] => [
  { text: 'Running it.', tool_use: { id, name: 'Bash', input: { command, description: 'append a line' } } },
  { text: 'Done.' },
];

/** Appends a line to log.txt without a shell redirect (the engine asks for every redirect to a file, rule or not). */
const APPEND = `node -e "require('fs').appendFileSync('log.txt', 'one\\n')"`;

const eventsOf = (items: SessionItem[], subtype: string) =>
  items.flatMap((i) => (i.kind === 'event' && i.event.subtype === subtype ? [i.event as TetherEvent & Record<string, unknown>] : []));

async function nextPrompt(it: AsyncIterator<SessionItem>, seen: SessionItem[]): Promise<PermissionRequest> {
  const item = (await until(it, isCanUseTool, seen, 60_000, 'the permission prompt')) as { message: Record<string, unknown> };
  return asPermissionRequest(item.message)!;
}

describe.each(['ws', 'grpc'] as const)('turn approval with the real CLI over %s', (t) => {
  const cleanups = cleanupsPerTest();

  it.each(['the session at create', 'the policy file'] as const)(
    "turnApproval owner (from %s): bob's Allow of a call from his own turn is refused with the reason, a session rule he granted earlier does not skip it, the owner's Allow runs it exactly once, all in the audit with the turn's author",
    async (from) => {
      const audit = new MemoryAuditLog();
      const scenario = { responses: [...bashTurn('toolu_owner', APPEND), ...bashTurn('toolu_bob', APPEND)] };
      const policy = from === 'the policy file' ? new StaticPolicy(Policy.compile({ turnApproval: 'owner' })) : undefined;
      const rig = cleanups.own(await startRig('claude', scenario, { clientTransport: t, agentTransport: t, audit, policy }));
      const options = { cwd: rig.cwd, ...(policy ? {} : { turn_approval: 'owner' as const }) };
      const owner = await (await rig.stack.client({ sub: 'olive' })).createSession({ agent: 'test-agent', options });
      const bob = await (await rig.stack.client({ sub: 'bob' })).attach(owner.id);
      expect(bob.role).toBe('controller');
      const [io, ib] = [owner[Symbol.asyncIterator](), bob[Symbol.asyncIterator]()];
      const [so, sb]: SessionItem[][] = [[], []];

      // The owner's turn: bob may answer it, and grants the engine's proposed rule for the session.
      await owner.sendUserMessage('append one');
      const first = await nextPrompt(ib, sb);
      expect(proposedSessionRule(first.raw)).toBeDefined();
      // The rule and the session's own folder (the command writes a file there): with both, the engine asks no more for it.
      const forSession = ((first.raw.permission_suggestions ?? []) as Record<string, unknown>[]).map((s) => ({
        ...s,
        destination: 'session',
      }));
      await bob.answer(first.requestId, { behavior: 'allow', updatedInput: first.input, updatedPermissions: forSession });
      await until(ib, isResult, sb, 60_000, "the owner's turn to end");
      await until(io, isResult, so, 60_000, "the owner's turn to end");

      // Bob's turn: the same command, covered by the rule bob granted, still asks, and only the owner may answer.
      await bob.sendUserMessage('append one again');
      const second = await nextPrompt(io, so);
      const card = eventsOf(so, 'prompt_turn').find((e) => e.request_id === second.requestId);
      expect(card).toMatchObject({ tool: 'Bash', turn_authors: ['bob'], approval: { needs: 'owner', may_answer: ['olive'] } });
      // As the terminal client prints it, and as the web page's permission card shows it (to bob).
      expect(describeEvent(card!)).toBe("* Bash, in bob's turn; needs the owner's approval (olive)");
      const page = new Transcript();
      for (const i of so)
        if (i.kind === 'event' || i.kind === 'engine')
          page.apply(
            i.kind === 'event'
              ? { kind: 'event', seq: i.seq, event: i.event }
              : { kind: 'engine', seq: i.seq, origin: i.origin, message: i.message },
          );
      const shown = page.entries.find((e) => e.kind === 'permission' && e.prompt.requestId === second.requestId) as Extract<
        Entry,
        { kind: 'permission' }
      >;
      expect(shown.prompt.turn).toEqual({ turn_authors: ['bob'], approval: { needs: 'owner', may_answer: ['olive'] } });
      expect(promptTurnText(shown.prompt.toolName, shown.prompt.turn!, 'bob')).toBe(
        "Bash, in your turn; needs the owner's approval (olive)",
      );
      expect([mayAnswer(shown.prompt.turn, 'bob'), mayAnswer(shown.prompt.turn, 'olive')]).toEqual([false, true]);
      const refused = await rejectionOf(bob.answer(second.requestId, { behavior: 'allow', updatedInput: second.input }));
      expect(refused.code).toBe('PERMISSION_DENIED');
      expect(refused.message).toContain("needs the owner's approval: this call comes from your turn");
      expect(readFileSync(join(rig.cwd, 'log.txt'), 'utf8')).toBe('one\n'); // waiting: not run
      await owner.answer(second.requestId, { behavior: 'allow', updatedInput: second.input });
      await until(io, isResult, so, 60_000, "bob's turn to end");

      expect(readFileSync(join(rig.cwd, 'log.txt'), 'utf8')).toBe('one\none\n');
      const bobResults = rig.fake!.lastToolResults().filter((r) => r.tool_use_id === 'toolu_bob');
      expect(bobResults).toEqual([expect.objectContaining({ is_error: false })]);
      expect(eventsOf(so, 'turn').map((e) => [e.state, e.authors])).toEqual([
        ['started', ['olive']],
        ['started', ['bob']],
      ]);

      const decisions = (await audit.read({ action: 'permission_decision' })).entries;
      expect(decisions).toEqual([
        expect.objectContaining({ principal: 'bob', request_id: first.requestId, behavior: 'allow', turn_authors: ['olive'] }),
        expect.objectContaining({
          principal: 'bob',
          request_id: second.requestId,
          result: 'refused',
          code: 'PERMISSION_DENIED',
          turn_authors: ['bob'],
        }),
        expect.objectContaining({ principal: 'olive', request_id: second.requestId, behavior: 'allow', turn_authors: ['bob'] }),
      ]);
      const hook = (await audit.read({ action: 'policy_decision' })).entries.filter((e) => e.tool === 'Bash');
      expect(hook.map((e) => [e.decision, e.turn_authors])).toEqual([
        ['none', ['olive']],
        ['ask', ['bob']],
      ]);
      await owner.stop();
    },
    180_000,
  );

  it('turnApproval approvers: the author is refused and told who may answer; an approver who is not the owner answers', async () => {
    const audit = new MemoryAuditLog();
    const rig = cleanups.own(
      await startRig('claude', { responses: bashTurn('toolu_b', APPEND) }, { clientTransport: t, agentTransport: t, audit }),
    );
    const owner = await (await rig.stack.client({ sub: 'olive' })).createSession({
      agent: 'test-agent',
      options: { cwd: rig.cwd, turn_approval: { approvers: ['carol'] } },
    });
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(owner.id);
    const carol = await (await rig.stack.client({ sub: 'carol' })).attach(owner.id);
    const ic = carol[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    await bob.sendUserMessage('append one');
    const ask = await nextPrompt(ic, seen);
    expect(eventsOf(seen, 'prompt_turn').at(-1)).toMatchObject({
      turn_authors: ['bob'],
      approval: { needs: 'approvers', may_answer: ['olive', 'carol'] },
    });
    const refused = await rejectionOf(bob.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input }));
    expect(refused.message).toBe('needs the approval of the owner (olive) or of an approver (carol): this call comes from your turn');
    await carol.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input });
    await until(ic, isResult, seen, 60_000, "bob's turn to end");
    expect(readFileSync(join(rig.cwd, 'log.txt'), 'utf8')).toBe('one\n');
    expect(
      (await audit.read({ action: 'permission_decision' })).entries.map((e) => [e.principal, e.result ?? e.behavior, e.turn_authors]),
    ).toEqual([
      ['bob', 'refused', ['bob']],
      ['carol', 'allow', ['bob']],
    ]);
    await owner.stop();
  }, 180_000);

  it("per-person rules: alice's \"allow for this session\" answers her later turns but not bob's; the owner's rule holds for everyone's turns", async () => {
    const audit = new MemoryAuditLog();
    const touch = (id: string, file: string) => bashTurn(id, `touch ${file}`);
    const scenario = {
      responses: [
        ...touch('toolu_a1', 'a.txt'),
        ...touch('toolu_a2', 'a.txt'),
        ...touch('toolu_b1', 'a.txt'),
        ...touch('toolu_o1', 'o.txt'),
        ...touch('toolu_b2', 'o.txt'),
      ],
    };
    const rig = cleanups.own(await startRig('claude', scenario, { clientTransport: t, agentTransport: t, audit }));
    const owner = await (await rig.stack.client({ sub: 'olive' })).createSession({ agent: 'test-agent', options: { cwd: rig.cwd } });
    const alice = await (await rig.stack.client({ sub: 'alice' })).attach(owner.id);
    const bob = await (await rig.stack.client({ sub: 'bob' })).attach(owner.id);
    const io = owner[Symbol.asyncIterator]();
    const seen: SessionItem[] = [];
    const turnEnds = () => until(io, isResult, seen, 60_000, 'the turn to end');
    const grant = async (who: RemoteSession, ask: PermissionRequest) =>
      who.answer(ask.requestId, { behavior: 'allow', updatedInput: ask.input, updatedPermissions: [proposedSessionRule(ask.raw)] });

    await alice.sendUserMessage('touch a');
    await grant(alice, await nextPrompt(io, seen));
    await turnEnds();
    await alice.sendUserMessage('touch a again');
    await turnEnds(); // her rule answered: nobody was asked
    await bob.sendUserMessage('touch a, bob');
    const bobs = await nextPrompt(io, seen); // alice's rule is hers: bob's call asks people
    await bob.answer(bobs.requestId, { behavior: 'deny', message: 'not now' });
    await turnEnds();
    await owner.sendUserMessage('touch o');
    await grant(owner, await nextPrompt(io, seen));
    await turnEnds();
    await bob.sendUserMessage('touch o, bob');
    await turnEnds(); // the owner's rule is for everyone

    const results = Object.fromEntries(rig.fake!.lastToolResults().map((r) => [r.tool_use_id, r.is_error === true]));
    expect(results).toEqual({ toolu_a1: false, toolu_a2: false, toolu_b1: true, toolu_o1: false, toolu_b2: false });
    const decided = eventsOf(seen, 'prompt_decided').map((e) => [e.decided_by, e.behavior, e.rule ?? null, e.granted_for ?? null]);
    expect(decided).toEqual([
      ['alice', 'allow', null, 'alice'],
      ['alice', 'allow', 'Bash(touch a.txt)', null],
      ['bob', 'deny', null, null],
      ['olive', 'allow', null, '*'],
      ['olive', 'allow', 'Bash(touch o.txt)', null],
    ]);
    const decisions = (await audit.read({ action: 'permission_decision' })).entries;
    expect(decisions.map((e) => [e.principal, e.behavior, e.turn_authors, e.granted_by ?? null])).toEqual([
      ['alice', 'allow', ['alice'], null],
      ['tether:rule', 'allow', ['alice'], 'alice'],
      ['bob', 'deny', ['bob'], null],
      ['olive', 'allow', ['olive'], null],
      ['tether:rule', 'allow', ['bob'], 'olive'],
    ]);
    await owner.stop();
  }, 180_000);
});
