/**
 * What the cluster tests (cluster.test.ts, cluster-sigkill.test.ts) share: the scripted turns,
 * the checks that a turn arrived whole, and small clients and waits.
 */
import { fileURLToPath } from 'node:url';
import { expect, onTestFailed } from 'vitest';
import WebSocket from 'ws';
import type { GatewayClient } from '../../client/gateway-client.js';
import type { SessionItem } from '../../client/remote-session.js';
import type { SessionInfo } from '../../core/protocol/methods.js';
import type { ClusterStack } from './cluster-stack.js';
import { until } from './items.js';
import { withTimeout } from './stack.js';

export const BURST_ENGINE = fileURLToPath(new URL('./burst-engine.mjs', import.meta.url));

export const BASH_TURN = {
  responses: [
    { text: 'Running it.', tool_use: { name: 'Bash', input: { command: 'echo hi >> made.txt', description: 'append a line' } } },
    { text: 'Done.' },
  ],
  fallback: { text: 'ok' },
};

/** A long answer streamed word by word, so a gateway can be killed in the middle of it. */
export const WORDS = Array.from({ length: 80 }, (_, n) => `w${n}`);
export const LONG_TURN = { responses: [{ text: WORDS.join(' '), chunk_delay_ms: 40 }], fallback: { text: 'ok' } };
export const isDelta = (i: SessionItem) =>
  i.kind === 'engine' && i.message.type === 'stream_event' && (i.message.event as { type?: string }).type === 'content_block_delta';
export const deltaText = (items: SessionItem[]) =>
  items
    .filter(isDelta)
    .map((i) => (i as unknown as { message: { event: { delta: { text?: string } } } }).message.event.delta.text ?? '')
    .join('');

/** Room for the cluster stack's teardown (clients, agent, balancer, fake, gateways, NATS; each step bounded). */
export const TEARDOWN_MS = 90_000;

export const seqsOf = (items: SessionItem[]) => items.filter((i) => i.kind !== 'reply').map((i) => (i as { seq: number }).seq);

/**
 * Alice on gateway `a` (and, with `list`, the others after it) creates a session and asks for
 * the long answer, Bob on gateway `b` attaches; returns once each has seen 5 streamed words.
 */
export async function longTurnUnderWay(stack: ClusterStack, a: number, b: number, aliceDials?: 'list') {
  const alice = await stack.client(a, 'alice', 'ws', aliceDials);
  const bob = await stack.client(b, 'bob');
  const s1 = await alice.createSession({ agent: 'builder', options: { include_partial_messages: true } });
  const s2 = await bob.attach(s1.id);
  const iters = [s1, s2].map((s) => s[Symbol.asyncIterator]());
  const seen: SessionItem[][] = [[], []];
  await s1.sendUserMessage('a long answer please');
  await Promise.all(
    iters.map(async (it, n) => {
      for (let k = 0; k < 5; k++) await until(it, isDelta, seen[n], 30_000, 'the stream to be under way');
    }),
  );
  return { alice, bob, s1, iters, seen };
}

/** Each client saw the whole turn: seqs one by one (none lost, none doubled), every word exactly once, the same last seq. */
export function expectWholeTurn(seen: SessionItem[][]): void {
  for (const list of seen) {
    const seqs = seqsOf(list);
    seqs.forEach((v, n) => n && expect(v, `seq after ${seqs[n - 1]}`).toBe(seqs[n - 1] + 1));
    expect(deltaText(list)).toBe(WORDS.join(' '));
  }
  expect(seqsOf(seen[1]).at(-1)).toBe(seqsOf(seen[0]).at(-1));
}

/**
 * Polls `client`'s listing until the session's entry satisfies `ok` (bounded); a listing that
 * fails because the connection was just cut (the session moved) is asked again.
 */
export async function listedWhen(
  client: GatewayClient,
  id: string,
  ok: (info: SessionInfo) => boolean,
  what: string,
  ms = 30_000,
): Promise<SessionInfo> {
  const deadline = Date.now() + ms;
  for (;;) {
    const info = (await client.listSessions().catch(() => [])).find((x) => x.id === id);
    if (info && ok(info)) return info;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}: ${JSON.stringify(info)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A JSON-RPC dialect client (plain `ws`) on `url`: initialize, then session_attach; resolves with that answer. */
export async function dialectAttach(
  url: string,
  token: string,
  sessionId: string,
): Promise<{ error: { message: string; data: { code: string } } }> {
  const ws = new WebSocket(url, 'tether-jsonrpc.v1', { headers: { authorization: `Bearer ${token}` } });
  try {
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const answers = new Map<number, (m: unknown) => void>();
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { id?: number };
      if (m.id !== undefined) answers.get(m.id)?.(m);
    });
    const request = (id: number, method: string, params: unknown) =>
      withTimeout(
        new Promise<unknown>((resolve) => (answers.set(id, resolve), ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params })))),
        10_000,
        `the answer to ${method}`,
      );
    await request(1, 'initialize', { protocol_version: '1.0', capabilities: [] });
    return (await request(2, 'session_attach', { session_id: sessionId })) as { error: { message: string; data: { code: string } } };
  } finally {
    ws.close();
  }
}

/** A failed test prints what each gateway logged. */
export function dumpLogsOnFailure(stack: ClusterStack): void {
  onTestFailed(() => {
    for (const g of stack.gateways) process.stderr.write(`--- ${g.id} (${g.url})\n${g.daemon.stderr()}\n`);
  });
}
