/**
 * An attach whose replay is larger than the client's outbound budget (a late joiner, or a
 * resume after a long disconnect): the gateway feeds it as the connection drains
 * (gateway/directory/replay-feed.ts). A client that reads gets all of it, in order, with the
 * attach's answer after its replay and the frames made meanwhile after the answer, and is never
 * cut; one that stops reading is cut once the live frames waiting behind its replay pass its
 * budget. Over both transports, with real sockets.
 */
import { describe, expect, it } from 'vitest';
import type { Channel } from '../core/channel/channel.js';
import { dial } from '../core/link/dial.js';
import { PROTOCOL_VERSION } from '../core/protocol/version.js';
import type { RpcPeer } from '../core/rpc/peer.js';
import { REPLAY_FEED_STALL_LOOKS, REPLAY_FEED_STALLED_POLL_MS, ReplayFeed, replayWindowBytes } from '../gateway/directory/replay-feed.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { startStack, type Stack } from './support/stack.js';
import { waitFor, withTimeout } from './support/wait.js';

const BUDGET = 1024 * 1024;
const BIG_PROMPTS = 12;
const BIG_PROMPT_CHARS = 256 * 1024;

/** What a hand-read connection saw, in arrival order: each session frame's seq, and the attach's answer. */
type Seen = { seq: number } | { answer: { next_seq?: number; error?: unknown } };

/**
 * Dials, says hello, asks to attach from seq 1, and records what arrives (reading unless told to
 * stop). `joined`: it lists `replay.joined.v1`, so the replay comes several frames to a message.
 */
async function joiner(url: string, token: string | undefined, sessionId: string, joined = false) {
  const channel: Channel = await dial(url, { token });
  const seen: Seen[] = [];
  let joinedMessages = 0; // text messages carrying more than one frame
  let reading = true;
  const read = async () => {
    for (;;) {
      for (let frame = channel.read(); frame !== undefined; frame = channel.read()) {
        if (typeof frame === 'string' && frame.includes('\n')) joinedMessages++;
        for (const text of typeof frame === 'string' ? frame.split('\n') : [frame.header]) {
          const msg = JSON.parse(text) as {
            id?: number;
            method?: string;
            params?: { seq?: number };
            result?: { next_seq?: number };
            error?: unknown;
          };
          if (msg.method === 'ping' && msg.id !== undefined)
            void channel.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: {} })).catch(() => {});
          else if (msg.method === 'session.frame') seen.push({ seq: msg.params!.seq! });
          else if (msg.id === 2) seen.push({ answer: msg.result ?? { error: msg.error } });
        }
      }
      if (channel.isClosed || !reading) return;
      await channel.readable();
    }
  };
  let reader = read();
  const send = (id: number, method: string, params: unknown) => channel.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  await send(1, 'hello', { protocol_version: PROTOCOL_VERSION, role: 'client', ...(joined ? { capabilities: ['replay.joined.v1'] } : {}) });
  await send(2, 'session.attach', { session_id: sessionId, from_seq: 1, read_only: true });
  return {
    channel,
    seen,
    joinedMessages: () => joinedMessages,
    seqs: () => seen.flatMap((s) => ('seq' in s ? [s.seq] : [])),
    answerAt: () => seen.findIndex((s) => 'answer' in s),
    stopReading: () => {
      reading = false;
      return reader;
    },
    readAgain: () => {
      reading = true;
      reader = read();
    },
  };
}

/** A session whose history holds `BIG_PROMPTS` prompts of 256 KiB, well over the budget. */
async function bigHistory(stack: Stack) {
  const owner = await stack.client();
  const session = await owner.createSession({ agent: 'test-agent' });
  for (let n = 0; n < BIG_PROMPTS; n++) await session.sendUserMessage(`big ${n} ${'x'.repeat(BIG_PROMPT_CHARS)}`);
  const gw = stack.gateway.directory.get(session.id)!;
  await waitFor(() => gw.info().last_seq > BIG_PROMPTS * 2, 20_000, 'the big prompts in the history');
  return { session, gw };
}

describe.each(['ws', 'grpc'] as const)('a replay larger than the budget, over %s', (transport) => {
  const cleanups = cleanupsPerTest();
  const open = async () =>
    cleanups.own(
      await startStack({ engine: 'demo', limits: { slowClientBytes: BUDGET, replay: { maxFrames: 100_000, maxBytes: 64 * 1024 * 1024 } } }),
    );
  const urlOf = (stack: Stack) => (transport === 'ws' ? stack.wsUrl : stack.grpcUrl);

  it.each([
    ['one frame to a message', false],
    ['joined several to a message (replay.joined.v1)', true],
  ])(
    'reaches a reading client whole and in order (%s), the answer after the replay, live frames after the answer; never cut',
    async (_, joined) => {
      const stack = await open();
      const { session, gw } = await bigHistory(stack);
      const historyEnd = gw.info().last_seq;
      const j = await joiner(urlOf(stack), stack.token, session.id, joined);
      cleanups.push(() => j.channel.close());
      // Live frames while the replay is being fed: they must wait behind it.
      for (let n = 0; n < 3; n++) await session.sendUserMessage(`live ${n}`);
      const lastSeq = () => gw.info().last_seq;
      await waitFor(
        () => j.seqs().at(-1) === lastSeq() && j.answerAt() >= 0,
        20_000,
        () => `the joiner to have every frame (has ${j.seqs().length} of ${lastSeq()})`,
      );

      expect(j.channel.isClosed).toBe(false);
      const seqs = j.seqs();
      expect(seqs).toEqual(seqs.map((_, n) => n + 1));
      const answer = j.seen[j.answerAt()] as { answer: { next_seq: number } };
      expect(answer.answer.next_seq).toBeGreaterThan(historyEnd);
      // Every replayed frame came before the answer, every later one after it.
      const before = j.seen.slice(0, j.answerAt()).flatMap((s) => ('seq' in s ? [s.seq] : []));
      expect(before.at(-1)).toBe(answer.answer.next_seq - 1);
      expect(before.length).toBe(answer.answer.next_seq - 1);
      expect(seqs.length).toBeGreaterThan(answer.answer.next_seq - 1);
      // The replay came as asked: several frames to a text message, or one each.
      if (joined) expect(j.joinedMessages()).toBeGreaterThan(0);
      else expect(j.joinedMessages()).toBe(0);
    },
    60_000,
  );

  it('cuts a joiner that stops reading once the live frames behind its replay pass the budget', async () => {
    const stack = await open();
    const { session, gw } = await bigHistory(stack);
    const j = await joiner(urlOf(stack), stack.token, session.id);
    cleanups.push(() => j.channel.close());
    await withTimeout(j.stopReading(), 5_000, 'the reader to stop'); // as its replay starts
    await waitFor(() => (gw.info().clients ?? []).length === 2, 10_000, 'the joiner to be attached');
    const joined = gw.info().clients!.find((c) => c.role === 'viewer')!.client_id;
    // Its replay is bigger than the window: part of it waits at the gateway (over WebSocket the
    // kernel's socket buffers take a few MiB first), and so does what follows.
    expect(BIG_PROMPTS * BIG_PROMPT_CHARS).toBeGreaterThan(replayWindowBytes(BUDGET));
    for (let n = 0; gw.roleOf(joined) !== undefined && n < 100; n++) await session.sendUserMessage(`live ${n} ${'y'.repeat(256 * 1024)}`);
    await waitFor(() => gw.roleOf(joined) === undefined, 10_000, 'the gateway to cut the joiner');
    // Reading again (within the gateway's close timeout), it reads what was handed over and then why it was cut.
    j.readAgain();
    const closed = await withTimeout(j.channel.closed, 10_000, 'the joiner to be closed');
    expect(closed.code).toBe('RESOURCE_EXHAUSTED');
    expect(closed.reason).toMatch(/slow consumer/);
    // The owner went on: its session still runs.
    const last = gw.info().last_seq;
    await session.sendUserMessage('after the cut');
    await waitFor(() => gw.info().last_seq > last, 5_000, 'the session to go on');
  }, 60_000);
});

/** A connection that never drains, under a feed: what the feed asks of it, counted. */
function stalledPeer(budget: number) {
  const seen = { looks: 0, admitted: [] as number[] };
  const channel = {
    isClosed: false,
    closed: new Promise<void>(() => {}),
    get bufferedBytes() {
      seen.looks++;
      return Number.MAX_SAFE_INTEGER; // a reader that stopped: always full
    },
  };
  const peer = {
    channel,
    maxBufferedBytes: budget,
    admitQueued: (queued: number) => {
      seen.admitted.push(queued);
      return queued <= budget;
    },
    post: () => true,
  } as unknown as RpcPeer;
  return { peer, seen, channel };
}

describe('ReplayFeed, by itself', () => {
  const frame = Buffer.alloc(100, 0x61);
  const message = { frame, bytes: frame.length, sizes: [frame.length] };

  it('looks at a connection that stopped reading ever more rarely, and not at all once it closes', async () => {
    const { peer, seen, channel } = stalledPeer(1_000_000);
    const feed = new ReplayFeed(peer, () => {});
    feed.replay([message]);
    await new Promise((r) => setTimeout(r, 600));
    // 2 ms apart for the first ~100 ms, then 50 ms apart: about 60 looks in 600 ms (300 before).
    expect(seen.looks).toBeLessThan(REPLAY_FEED_STALL_LOOKS + 600 / REPLAY_FEED_STALLED_POLL_MS + 10);
    expect(seen.looks).toBeGreaterThan(REPLAY_FEED_STALL_LOOKS / 2); // it did keep looking
    channel.isClosed = true;
    await new Promise((r) => setTimeout(r, 2 * REPLAY_FEED_STALLED_POLL_MS));
    const atClose = seen.looks;
    await new Promise((r) => setTimeout(r, 3 * REPLAY_FEED_STALLED_POLL_MS));
    expect(seen.looks).toBe(atClose);
  });

  it("counts the replies waiting behind a replay against the budget, as the live frames'", async () => {
    const { peer, seen, channel } = stalledPeer(1_000);
    const feed = new ReplayFeed(peer, () => {});
    feed.replay([message]);
    expect(feed.inOrder(() => {}, 600)).toBe(true);
    expect(feed.inOrder(() => {}, 600)).toBe(true); // 600 waited: within the budget
    expect(feed.inOrder(() => {}, 600)).toBe(false); // 1,200 waited: refused (the real peer cuts here)
    expect(feed.frame(frame, frame.length)).toBe(false);
    expect(seen.admitted).toEqual([0, 600, 1_200, 1_200]);
    channel.isClosed = true;
  });
});
