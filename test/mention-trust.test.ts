import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as acp from '@agentclientprotocol/sdk';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RemoteSession, SessionItem } from '../client/remote-session.js';
import { Policy } from '../core/policy/policy.js';
import { INPUT_REFUSED } from '../core/protocol/events.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { StaticPolicy } from '../gateway/policy/policy-source.js';
import { spawnAcp } from './support/acp-editor.js';
import { runTether, TETHER_CLAUDE_BIN } from './support/cli.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { startRig, type EngineRig } from './support/engines.js';
import { rejectionOf, until } from './support/items.js';
import { readTurn } from './support/turns.js';
import { waitFor, withTimeout } from './support/wait.js';

/**
 * Issue 27, item 6, with the real CLI and the scripted model: the engine reads an @-mentioned
 * file into the prompt without a tool call (docs/engine-protocol.md, "@-mentions"), so the
 * gateway judges each mention with the policy's read rules and the agent refuses one that leads
 * outside the session's folder. The fake model records every request: a secret that reached
 * "the model" would be in one of them.
 */
const SECRET = 'SECRET_ENV_7f3a';
const TOKEN = 'AGENT_TOKEN_91c2';
const HOME_SECRET = 'HOME_NETRC_55d0';
const README = 'README_MARK_0b1e';

let rig: EngineRig;
let outside: TempDir;
const audit = new MemoryAuditLog();

beforeAll(async () => {
  rig = await startRig(
    'claude',
    { responses: [] },
    { audit, policy: new StaticPolicy(Policy.compile({ permissions: { deny: ['Read(./.env)'] } })) },
  );
  outside = makeTempDir('tether-outside-');
  writeFileSync(join(rig.cwd, '.env'), `API_KEY=${SECRET}\n`);
  writeFileSync(join(rig.cwd, 'README.md'), `# ${README}\n`);
  writeFileSync(join(outside.path, 'agent-token'), `${TOKEN}\n`);
  writeFileSync(join(rig.home!, '.netrc'), `${HOME_SECRET}\n`);
  symlinkSync(join(outside.path, 'agent-token'), join(rig.cwd, 'notes.txt')); // inside the folder, leading out
  symlinkSync(join(rig.cwd, '.env'), join(rig.cwd, 'config.txt')); // inside, to the denied file
  mkdirSync(join(rig.cwd, 'docs'));
});
afterAll(async () => {
  await rig?.stop();
  outside?.cleanup();
});

/** Whether any request the CLI sent to the model carried `text`. */
const modelSaw = (text: string) => rig.fake!.requests.some((r) => r.raw.includes(text));

/** A session on the rig's agent (its folder: the agent's default, rig.cwd, unless `cwd`). */
async function session(cwd?: string): Promise<{ s: RemoteSession; it: AsyncIterator<SessionItem> }> {
  const client = await rig.stack.client();
  const s = await client.createSession({ agent: 'test-agent', options: cwd ? { cwd } : {} });
  return { s, it: s[Symbol.asyncIterator]() };
}

/** Sends `prompt` and reads until its turn's result; the prompt worked. */
async function answered(s: RemoteSession, it: AsyncIterator<SessionItem>, prompt: string): Promise<void> {
  await s.sendUserMessage(prompt);
  await readTurn(s, () => undefined, it, 60_000);
}

describe('@-mentions of files the policy denies are refused at the gateway', () => {
  it.each([
    ["the agent's default folder", undefined],
    ['a folder the client names', 'named'],
  ])(
    'in a session in %s: @.env, its absolute path, quoted with a line range → PERMISSION_DENIED naming the rule; @README.md still reaches the model',
    async (_, named) => {
      const { s, it } = await session(named ? rig.cwd : undefined);
      for (const prompt of ['summarise @.env please', `summarise @${rig.cwd}/.env`, 'see @".env"#L1-2, thanks', 'look at @docs/../.env.']) {
        const err = await rejectionOf(s.sendUserMessage(prompt));
        expect(err.code).toBe('PERMISSION_DENIED');
        expect(err.message).toContain('policy rule: Read(./.env)');
        expect(err.message).toMatch(/mentions @\S*\.env/);
      }
      await answered(s, it, 'summarise @README.md please');
      expect(modelSaw(README)).toBe(true);
      expect(modelSaw(SECRET)).toBe(false);
      const refused = (await audit.read({ action: 'prompt' })).entries.filter((e) => e.result === 'refused' && e.session_id === s.id);
      expect(refused).toHaveLength(4);
      expect(refused[0]).toMatchObject({ decided_by: 'tether:policy', code: 'PERMISSION_DENIED' });
    },
  );
});

describe('@-mentions that lead outside the session folder are refused by the agent', () => {
  it.each([
    ['an absolute path to a token file elsewhere', () => `@${join(outside.path, 'agent-token')}`, 'outside the session folder'],
    ['a ../ path to it', () => `@../${basename(outside.path)}/agent-token`, 'outside the session folder'],
    ['a symlink in the folder that leads out', () => '@notes.txt', 'outside the session folder'],
    ["~/ (the engine's HOME)", () => '@~/.netrc', 'outside the session folder'],
    ['a symlink in the folder to the denied .env', () => '@config.txt', 'through a symlink'],
  ])('%s: the client sees INPUT_REFUSED, nothing reaches the model, and the session goes on', async (_, mention, why) => {
    const { s, it } = await session();
    const text = `summarise ${mention()} please`;
    await s.sendUserMessage(text); // the gateway cannot tell: the name is allowed as written
    const seen: SessionItem[] = [];
    const refusal = await until(it, (i) => i.kind === 'event' && i.event.subtype === 'engine_error', seen, 30_000, "the agent's refusal");
    expect(refusal.kind === 'event' && refusal.event).toMatchObject({ code: INPUT_REFUSED });
    const message = refusal.kind === 'event' && refusal.event.subtype === 'engine_error' ? refusal.event.message : '';
    expect(message).toContain(`mentions ${mention()}`);
    expect(message).toContain(why);
    // Accounted for: the session is idle again, and the next prompt is the one the engine answers.
    await until(
      it,
      (i) => i.kind === 'event' && i.event.subtype === 'state' && i.event.state === 'idle',
      seen,
      10_000,
      'idle after the refusal',
    );
    await answered(s, it, 'summarise @README.md please');
    for (const secret of [TOKEN, HOME_SECRET, SECRET]) expect(modelSaw(secret)).toBe(false);
  });
});

describe("ACP: an editor's resource_link is an @-mention, judged the same way", () => {
  it('a resource_link to the denied .env is refused (PERMISSION_DENIED, the rule named); one to README.md reaches the model', async () => {
    const editor = spawnAcp(['--agent', 'test-agent', '--gateway', rig.stack.url, '--cwd', rig.cwd], { TETHER_TOKEN: rig.stack.token });
    try {
      await editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: rig.cwd, mcpServers: [] });
      const link = (file: string): acp.ContentBlock => ({
        type: 'resource_link',
        uri: pathToFileURL(join(rig.cwd, file)).href,
        name: file,
      });
      const denied = await withTimeout(
        editor.agent
          .request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'summarise' }, link('.env')] })
          .then(
            () => undefined,
            (err: unknown) => err,
          ),
        30_000,
        'the refused prompt',
      );
      expect(denied).toBeInstanceOf(acp.RequestError);
      expect((denied as acp.RequestError).data).toMatchObject({ code: 'PERMISSION_DENIED' });
      expect((denied as acp.RequestError).message).toContain('Read(./.env)');
      const ok = await withTimeout(
        editor.agent.request(acp.methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: 'text', text: 'summarise' }, link('README.md')],
        }),
        60_000,
        'the README prompt',
      );
      expect(ok.stopReason).toBe('end_turn');
      expect(modelSaw(README)).toBe(true);
      expect(modelSaw(SECRET)).toBe(false);
    } finally {
      await editor.close();
    }
  });

  it('a resource_link through a symlink that leads out ends the turn with PERMISSION_DENIED from the agent', async () => {
    const editor = spawnAcp(['--agent', 'test-agent', '--gateway', rig.stack.url, '--cwd', rig.cwd], { TETHER_TOKEN: rig.stack.token });
    try {
      await editor.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      const { sessionId } = await editor.agent.request(acp.methods.agent.session.new, { cwd: rig.cwd, mcpServers: [] });
      const uri = pathToFileURL(join(rig.cwd, 'notes.txt')).href;
      const err = await withTimeout(
        editor.agent
          .request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'resource_link', uri, name: 'notes.txt' }] })
          .then(
            () => undefined,
            (e: unknown) => e,
          ),
        30_000,
        'the refused prompt',
      );
      expect((err as acp.RequestError).data).toMatchObject({ code: 'PERMISSION_DENIED' });
      expect((err as acp.RequestError).message).toContain('outside the session folder');
      expect(modelSaw(TOKEN)).toBe(false);
    } finally {
      await editor.close();
    }
  });
});

describe('JSON-RPC dialect: a user_message goes the same prompt path', () => {
  it('@.env is refused at once naming the rule; an @-mention the agent refuses answers the user_message with PERMISSION_DENIED instead of hanging', async () => {
    const ws = new WebSocket(rig.stack.wsUrl, 'tether-jsonrpc.v1', { headers: { authorization: `Bearer ${rig.stack.token}` } });
    const answers = new Map<number, Record<string, any>>();
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as Record<string, any>;
      if (typeof m.id === 'number' && ('result' in m || 'error' in m)) answers.set(m.id, m);
    });
    let next = 1;
    const call = async (method: string, params: Record<string, unknown>) => {
      const id = next++;
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      await waitFor(() => answers.has(id), 20_000, `the answer to ${method}`);
      return answers.get(id)!;
    };
    try {
      await withTimeout(new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject)), 5_000, 'open');
      await call('initialize', { protocol_version: '1.0', capabilities: ['streaming', 'permissions'] });
      const sessionId = (await call('session_create', { agent: 'test-agent' })).result.session_id as string;
      const denied = await call('user_message', { session_id: sessionId, content: 'summarise @.env' });
      expect(denied.error?.data?.code).toBe('PERMISSION_DENIED');
      expect(denied.error?.message).toContain('Read(./.env)');
      const refused = await call('user_message', { session_id: sessionId, content: `summarise @${join(outside.path, 'agent-token')}` });
      expect(refused.error?.data?.code).toBe('PERMISSION_DENIED');
      expect(refused.error?.message).toContain('outside the session folder');
      const ok = await call('user_message', { session_id: sessionId, content: 'summarise @README.md' });
      expect(ok.result?.status).toBe('completed');
      expect(modelSaw(TOKEN)).toBe(false);
      expect(modelSaw(SECRET)).toBe(false);
    } finally {
      ws.terminate();
    }
  });
});

describe('the terminal programs end a prompt the agent refused', () => {
  it('tether chat (piped input) prints the refusal and exits once its input ended; tether run exits 1 saying why', async () => {
    const env = { TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token! };
    const mention = `@${join(outside.path, 'agent-token')}`;
    const chat = await runTether(['chat', '--agent', 'test-agent'], { env, input: `summarise ${mention}\n`, timeoutMs: 20_000 });
    expect(chat.stdout).toContain(`engine error ${INPUT_REFUSED}`);
    expect(chat.stdout).toContain(`mentions ${mention}`);
    expect(chat.code).toBe(0);
    const run = await runTether(['run', '--agent', 'test-agent', `summarise ${mention}`], { env, timeoutMs: 20_000 });
    expect(run.stderr).toContain(`engine error ${INPUT_REFUSED}`);
    expect(run.code).toBe(1);
    expect(modelSaw(TOKEN)).toBe(false);
  }, 60_000);

  it('tether-claude (the SDK drop-in) says on stderr why the prompt was refused', async () => {
    const env = { TETHER_GATEWAY: rig.stack.url, TETHER_TOKEN: rig.stack.token!, TETHER_AGENT: 'test-agent' };
    const mention = `@${join(outside.path, 'agent-token')}`;
    const input =
      JSON.stringify({
        type: 'user',
        message: { role: 'user', content: `summarise ${mention}` },
        parent_tool_use_id: null,
        session_id: '',
      }) + '\n';
    const out = await runTether(['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json'], {
      env,
      input,
      bin: TETHER_CLAUDE_BIN,
      timeoutMs: 20_000,
    });
    expect(out.stderr).toContain(`tether-claude: agent "test-agent" refused the prompt: it mentions ${mention}`);
    expect(modelSaw(TOKEN)).toBe(false);
  }, 30_000);
});
