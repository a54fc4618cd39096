/**
 * One create-only token cannot blind `sessions.list` (issue 27, item 10): a session's options
 * are bounded at create, listings carry only cwd, model and permission_mode (session.info has
 * the rest) and come in pages, and an answer over the frame limit is an error to the caller in
 * every JSON-RPC server (native, dialect, /acp), never silence.
 * Engine: the demo engine; nothing here reaches an engine past its spawn (the listing, the
 * refusal and the answers are the gateway's).
 */
import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { acpEndpoint } from '../bin/acp-endpoint.js';
import { memoryChannelPair, type MemoryChannel } from '../core/channel/memory.js';
import { MAX_SESSION_OPTIONS_BYTES } from '../core/protocol/session-options.js';
import { Gateway } from '../gateway/gateway.js';
import type { Principal } from '../gateway/door/principal.js';
import { startGatewayServer, type GatewayServer } from '../gateway/server.js';
import { textFrame } from './support/channel-read.js';
import { runTether } from './support/cli.js';
import { startStack, type Stack } from './support/stack.js';
import { withTimeout } from './support/wait.js';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A stack whose gateway takes frames of at most 512 KiB. */
async function smallFrameStack(): Promise<Stack> {
  const stack = await startStack({ engine: 'demo', maxFrameBytes: 512 * 1024 });
  cleanups.push(() => stack.stop());
  return stack;
}

/** A raw JSON-RPC socket (after hello, for the native protocol): the answer to each request. */
async function rawNative(stack: Stack): Promise<(method: string, params: unknown) => Promise<Record<string, any>>> {
  const ws = new WebSocket(`${stack.wsUrl}/v1/connect`, { headers: { authorization: `Bearer ${stack.token}` } });
  cleanups.push(() => ws.terminate());
  const answers = new Map<number, (m: Record<string, any>) => void>();
  ws.on('message', (d) => {
    const m = JSON.parse(String(d));
    if (typeof m.id === 'number' && m.method === undefined) answers.get(m.id)?.(m);
  });
  await withTimeout(new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject)), 5_000, 'the WebSocket');
  let next = 1;
  const ask = (method: string, params: unknown) => {
    const id = next++;
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return withTimeout(new Promise<Record<string, any>>((r) => answers.set(id, r)), 10_000, `the answer to ${method}`);
  };
  await ask('hello', { protocol_version: '2.0', role: 'client' });
  return ask;
}

describe('session options are bounded at create', () => {
  it.each([
    ['a long system prompt', { system_prompt: 'x'.repeat(MAX_SESSION_OPTIONS_BYTES) }],
    ['many long extra_args', { extra_args: Array.from({ length: 200 }, () => 'y'.repeat(400)) }],
  ])(
    '%s is refused with INVALID_ARGUMENT, naming the size and the limit',
    async (_what, options) => {
      const stack = await smallFrameStack();
      const client = await stack.client();
      await expect(client.createSession({ agent: 'test-agent', options })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining(`over the limit of ${MAX_SESSION_OPTIONS_BYTES}`),
      });
      expect(await client.listSessions()).toEqual([]);
    },
    60_000,
  );
});

describe('sessions.list with many sessions carrying large options', () => {
  it('answers (the old form, pages, tether sessions --json) and session.info has the whole options', async () => {
    const stack = await smallFrameStack();
    const client = await stack.client();
    const prompt = 'p'.repeat(60_000); // 12 of them: 720 KB, over the 512 KiB frame limit
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const s = await client.createSession({ agent: 'test-agent', options: { system_prompt: prompt, cwd: tmpdir(), model: `model-${i}` } });
      ids.push(s.id);
    }
    ids.sort();
    const listed = await withTimeout(client.listSessions(), 10_000, 'sessions.list');
    expect(listed.map((s) => s.id)).toEqual(ids);
    for (const s of listed) expect(Object.keys(s.options).sort()).toEqual(['cwd', 'model']);

    const ask = await rawNative(stack);
    const old = await ask('sessions.list', {}); // an old client: every session, one answer
    expect(old.result.sessions.map((s: { id: string }) => s.id)).toEqual(ids);
    const seen: string[] = [];
    let cursor: string | undefined;
    const sizes: number[] = [];
    do {
      const page = (await ask('sessions.list', { limit: 5, ...(cursor ? { cursor } : {}) })).result;
      sizes.push(page.sessions.length);
      seen.push(...page.sessions.map((s: { id: string }) => s.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(sizes).toEqual([5, 5, 2]);
    expect(seen).toEqual(ids);
    expect((await ask('sessions.list', { limit: 0 })).error).toMatchObject({ code: -32602, data: { code: 'INVALID_ARGUMENT' } });

    const details = await client.getSession(ids[3]);
    expect(details.options.system_prompt).toBe(prompt);
    await expect(client.getSession('no-such-session')).rejects.toMatchObject({ code: 'NOT_FOUND' });

    const r = await runTether(['sessions', '--json'], { env: { TETHER_GATEWAY: stack.url, TETHER_TOKEN: stack.token } });
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as { id: string }[]).map((s) => s.id).sort()).toEqual(ids);
  }, 120_000);
});

describe('an answer over the frame limit is an error to the caller, never silence', () => {
  // A principal whose name alone makes the answer to hello / initialize larger than a 1 KiB frame.
  const longName: Principal = { sub: 'n'.repeat(2_000), kind: 'any', canCreate: true, canControl: true, canAdmin: false };

  async function overMemory(dialect: 'native' | 'jsonrpc', method: string, params: unknown): Promise<Record<string, any>> {
    const gateway = new Gateway();
    cleanups.push(() => gateway.close());
    const [ours, theirs]: MemoryChannel[] = memoryChannelPair({ maxFrameBytes: 1024 });
    cleanups.push(() => ours.close());
    gateway.accept(theirs, longName, undefined, dialect);
    const it = ours[Symbol.asyncIterator]();
    await ours.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
    const r = await withTimeout(it.next(), 5_000, `the answer to ${method}`);
    return JSON.parse(textFrame(r.value));
  }

  it('native: the answer to hello over the limit is RESOURCE_EXHAUSTED', async () => {
    const r = await overMemory('native', 'hello', { protocol_version: '2.0', role: 'client' });
    expect(r).toMatchObject({ id: 1, error: { data: { code: 'RESOURCE_EXHAUSTED', limit: 1024 } } });
    expect(r.error.message).toContain('over the frame limit of 1024');
  });

  it('JSON-RPC dialect: the answer to initialize over the limit is RESOURCE_EXHAUSTED', async () => {
    const r = await overMemory('jsonrpc', 'initialize', { protocol_version: '1.0' });
    expect(r).toMatchObject({ id: 1, error: { data: { code: 'RESOURCE_EXHAUSTED', limit: 1024 } } });
  });

  it('/acp: the answer to initialize over the limit is RESOURCE_EXHAUSTED', async () => {
    const server: GatewayServer = await startGatewayServer(new Gateway(), {
      port: 0,
      maxFrameBytes: 200,
      auth: { verifier: 'off' },
      acp: acpEndpoint(),
    });
    cleanups.push(() => server.close());
    const ws = new WebSocket(`${server.url}/acp`);
    cleanups.push(() => ws.terminate());
    const answer = new Promise<Record<string, any>>((resolve) => ws.once('message', (d) => resolve(JSON.parse(String(d)))));
    await withTimeout(new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject)), 5_000, 'the /acp WebSocket');
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } }));
    const r = await withTimeout(answer, 5_000, 'the answer to initialize');
    expect(r).toMatchObject({ id: 1, error: { data: { code: 'RESOURCE_EXHAUSTED', limit: 200 } } });
  });
});
