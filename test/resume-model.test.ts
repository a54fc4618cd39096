/**
 * The sequence/ack/resume model under random interleavings (threats.md D1, D2, D4, D5, D6,
 * D7), with the real classes: the agent's SessionRelay (numbering, outbox, acks, backpressure,
 * input applied once) over a fake engine; the gateway's Session (agent-seq dedupe, replay
 * log, pending inputs re-sent after an agent reconnect, input-id dedupe); RemoteSession on
 * the client side (dedupe by seq). Between them the test plays both links as queues it can
 * deliver one message at a time, cut (dropping whatever was in flight) and re-open.
 *
 * After every random run the links are healed and drained and the engine exits; then:
 * - the session's history holds the engine's output exactly once, in order (the agent never
 *   evicts: it pushes back on the engine instead);
 * - every client's app-level log equals that history from where it joined, each frame once and
 *   in order; a position the replay log no longer held shows up as an explicit gap event
 *   covering exactly what is missing, never as a silent skip;
 * - every input id was written to the engine exactly once, in the order of the prompt events
 *   every participant saw; a retry of the same id is a duplicate;
 * - forged acks (beyond what was sent) are ignored; a resume beyond the last frame is refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ExitInfo } from '../agent/engine-process.js';
import type { EngineLine } from '../agent/line-splitter.js';
import { readEngineFrame } from '../core/wire/session-frame.js';
import { SessionRelay, type Outgoing } from '../agent/session-relay.js';
import { RemoteSession } from '../client/remote-session.js';
import { TetherError } from '../core/errors.js';
import { silentLogger } from '../core/logging.js';
import type { NotificationParams } from '../core/protocol/methods.js';
import type { RpcPeer } from '../core/rpc/peer.js';
import { MemoryAuditLog } from '../gateway/audit/audit-log.js';
import { DEFAULT_CONTROL_ANSWER_MS } from '../gateway/session/control-routing.js';
import { Durability, Session, type EngineHost, type Member } from '../gateway/session/session.js';
import { MemorySessionStore } from '../gateway/session/session-store.js';
import { TEST_SEED } from './support/seed.js';

const NUM_RUNS = Number(process.env.FC_RUNS ?? 1_000);
const SEED = TEST_SEED;
const CLIENTS = 3;
const SESSION_ID = 'model-session';

/** Stands in for EngineProcess: lines are pushed by the test and pulled by the relay; writes are recorded. */
class FakeEngine {
  readonly written: Record<string, unknown>[] = [];
  /** Everything the engine "wrote to stdout", in order, as the relay will see it. */
  readonly output: EngineLine[] = [];
  private readonly queue: EngineLine[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;
  private resolveExit!: (e: ExitInfo) => void;
  readonly exited = new Promise<ExitInfo>((r) => (this.resolveExit = r));

  push(item: EngineLine): void {
    this.output.push(item);
    this.queue.push(item);
    this.wake();
  }

  end(): void {
    this.ended = true;
    this.resolveExit({ code: 0, signal: null, stderrTail: '' });
    this.wake();
  }

  /** Lines written but not yet pulled by the relay (the engine is blocked on its pipe). */
  get unread(): number {
    return this.queue.length;
  }

  async *lines(): AsyncIterable<EngineLine> {
    for (;;) {
      const item = this.queue.shift();
      if (item) {
        yield item;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  async write(line: Record<string, unknown>): Promise<void> {
    this.written.push(line);
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
}

type Up = { kind: 'out'; item: Outgoing } | { kind: 'input_ack'; seq: number };
type Down = { kind: 'ack'; seq: number } | { kind: 'input'; seq: number; line: Record<string, unknown> };

interface Client {
  remote: RemoteSession;
  member: Member | undefined;
  wire: string[];
  generation: number;
  lastInputId: string | undefined;
}

type Cmd =
  | { t: 'emit'; n: number; invalid: boolean }
  | { t: 'deliverUp'; n: number }
  | { t: 'deliverDown'; n: number }
  | { t: 'gatewayAck' }
  | { t: 'deliverAndAck'; n: number }
  | { t: 'agentCut' }
  | { t: 'agentFlap'; staleHello: boolean }
  | { t: 'agentReconnect'; staleHello: boolean }
  | { t: 'deliverClient'; c: number; n: number }
  | { t: 'clientCut'; c: number }
  | { t: 'clientResume'; c: number }
  | { t: 'send'; c: number }
  | { t: 'retry'; c: number }
  | { t: 'forgeAck'; k: number }
  | { t: 'resumeBeyond'; c: number; k: number };

const client = fc.integer({ min: 0, max: CLIENTS - 1 });
const command: fc.Arbitrary<Cmd> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant('emit' as const), n: fc.integer({ min: 1, max: 8 }), invalid: fc.boolean() }), weight: 4 },
  { arbitrary: fc.record({ t: fc.constant('deliverUp' as const), n: fc.integer({ min: 1, max: 3 }) }), weight: 4 },
  { arbitrary: fc.record({ t: fc.constant('deliverDown' as const), n: fc.integer({ min: 1, max: 4 }) }), weight: 3 },
  { arbitrary: fc.record({ t: fc.constant('gatewayAck' as const) }), weight: 3 },
  { arbitrary: fc.record({ t: fc.constant('deliverAndAck' as const), n: fc.integer({ min: 1, max: 3 }) }), weight: 4 },
  { arbitrary: fc.record({ t: fc.constant('agentCut' as const) }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('agentFlap' as const), staleHello: fc.boolean() }), weight: 3 },
  { arbitrary: fc.record({ t: fc.constant('agentReconnect' as const), staleHello: fc.boolean() }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('deliverClient' as const), c: client, n: fc.integer({ min: 1, max: 10 }) }), weight: 4 },
  { arbitrary: fc.record({ t: fc.constant('clientCut' as const), c: client }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('clientResume' as const), c: client }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('send' as const), c: client }), weight: 3 },
  { arbitrary: fc.record({ t: fc.constant('retry' as const), c: client }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('forgeAck' as const), k: fc.integer({ min: 0, max: 5 }) }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('resumeBeyond' as const), c: client, k: fc.integer({ min: 0, max: 3 }) }), weight: 1 },
);

const tick = () => new Promise<void>((r) => setImmediate(r));

/** One world: fake engine → relay → (agent link) → Session → (client links) → RemoteSessions. */
class World {
  readonly engine = new FakeEngine();
  readonly relay: SessionRelay<FakeEngine>;
  readonly session: Session;
  readonly clients: Client[] = [];
  /** Every frame the session broadcast, by seq (a member that never leaves). */
  readonly history: { seq: number; text: string; params: NotificationParams<'session.frame'>; line?: string }[] = [];
  up: Up[] = [];
  down: Down[] = [];
  agentUp = true;
  lastReceived = 0;
  retries: ('applied' | 'duplicate')[] = [];
  forgedAcksIgnored = 0;
  resumesRefused = 0;
  private lineNo = 0;
  private inputNo = 0;
  private memberNo = 0;
  private readonly host: EngineHost;

  constructor(
    readonly replayFrames: number,
    readonly maxUnackedBytes: number,
  ) {
    this.relay = new SessionRelay(SESSION_ID, this.engine, silentLogger, { maxUnackedBytes });
    this.host = {
      input: (_id, seq, line) => {
        if (this.agentUp) this.down.push({ kind: 'input', seq, line });
      },
      stop: async () => {},
    };
    const store = new MemorySessionStore();
    this.session = new Session({
      id: SESSION_ID,
      agent: 'model-agent',
      engine: 'demo',
      owner: 'alice',
      options: {},
      host: this.host,
      limits: {
        replay: { maxFrames: replayFrames, maxBytes: 64 * 1024 * 1024 },
        maxPendingPrompts: 32,
        promptExpiryMs: 3_600_000,
        maxMembers: 32,
        controlAnswerMs: DEFAULT_CONTROL_ANSWER_MS,
      },
      logger: silentLogger,
      audit: new MemoryAuditLog(),
      store,
      durability: new Durability(store),
    });
    this.session.attach(
      {
        clientId: 'historian',
        principal: 'alice',
        transport: 'memory',
        sendFrame: (bytes) => {
          const text = bytes.toString('utf8');
          const params = (JSON.parse(text) as { params: NotificationParams<'session.frame'> }).params;
          this.history.push({ seq: params.seq, text, params, line: readEngineFrame(text)?.line });
        },
        sendReply: () => {},
      },
      'viewer',
    );
    this.relay.setSink(this.sink());
    this.session.bindHost(this.host, 0);
    for (let c = 0; c < CLIENTS; c++) {
      const remote = new RemoteSession(
        { peer: () => Promise.reject(new Error('unused')) as Promise<RpcPeer> },
        { session: this.session.info(), role: 'owner', client_id: 'none' },
        false,
      );
      const cl: Client = { remote, member: undefined, wire: [], generation: 0, lastInputId: undefined };
      this.clients.push(cl);
      this.connectClient(cl, 1);
    }
  }

  private sink() {
    return {
      send: (_id: string, item: Outgoing) => {
        if (this.agentUp) this.up.push({ kind: 'out', item });
      },
      ackInput: (_id: string, seq: number) => {
        if (this.agentUp) this.up.push({ kind: 'input_ack', seq });
      },
    };
  }

  private connectClient(cl: Client, from: number): void {
    const generation = ++cl.generation;
    const member: Member = {
      clientId: `client-${++this.memberNo}`,
      principal: 'alice',
      transport: 'memory',
      sendFrame: (bytes) => {
        if (cl.generation === generation && cl.member === member) cl.wire.push(bytes.toString('utf8'));
      },
      sendReply: () => {},
    };
    cl.member = member;
    this.session.attach(member, 'owner', from);
  }

  async run(cmd: Cmd): Promise<void> {
    switch (cmd.t) {
      case 'emit':
        for (let i = 0; i < cmd.n; i++) {
          const n = ++this.lineNo;
          if (cmd.invalid && i === 0)
            this.engine.push({ kind: 'invalid', code: 'NOT_JSON', message: 'not json', preview: `garbage ${n}`, bytes: 9 });
          else {
            const line = JSON.stringify({ type: 'assistant', n, pad: 'x'.repeat((n % 7) * 40) });
            this.engine.push({ kind: 'frame', line, bytes: Buffer.from(line), value: JSON.parse(line) as Record<string, unknown> });
          }
        }
        break;
      case 'deliverUp':
        for (let i = 0; i < cmd.n && this.up.length; i++) {
          const m = this.up.shift()!;
          if (m.kind === 'input_ack') this.session.onInputAck(m.seq);
          else {
            if (m.item.kind === 'line') this.session.onEngineLine(m.item.seq, m.item.bytes, m.item.meta);
            else this.session.onEngineEvent(m.item.seq, m.item.event);
            this.lastReceived = m.item.seq; // AgentLink acks the seq of what it last received
          }
        }
        break;
      case 'deliverAndAck':
        // The common case: a few frames arrive, the gateway acks at once and the ack arrives.
        await this.run({ t: 'deliverUp', n: cmd.n });
        await this.run({ t: 'gatewayAck' });
        await this.run({ t: 'deliverDown', n: 64 });
        break;
      case 'gatewayAck':
        if (this.agentUp && this.lastReceived > 0) this.down.push({ kind: 'ack', seq: this.lastReceived });
        break;
      case 'deliverDown':
        for (let i = 0; i < cmd.n && this.down.length; i++) {
          const m = this.down.shift()!;
          if (m.kind === 'ack') this.relay.ack(m.seq);
          else await this.relay.input(m.seq, m.line);
        }
        break;
      case 'agentCut':
        if (!this.agentUp) break;
        this.agentUp = false;
        this.up = [];
        this.down = [];
        this.relay.setSink(undefined);
        this.session.bindHost(undefined);
        break;
      case 'agentFlap':
        // The agent link drops and comes straight back.
        await this.run({ t: 'agentCut' });
        await this.run({ t: 'agentReconnect', staleHello: cmd.staleHello });
        break;
      case 'agentReconnect':
        if (this.agentUp) break;
        this.agentUp = true;
        this.lastReceived = 0;
        // The gateway re-binds during the agent's hello, then the agent re-sends its outbox. A
        // hello without last_input_seq (it defaults to 0) makes the gateway re-send every input
        // it holds: the relay must still write each input seq once (D4).
        this.session.bindHost(this.host, cmd.staleHello ? 0 : this.relay.lastAppliedInputSeq);
        this.relay.setSink(this.sink());
        break;
      case 'deliverClient': {
        const cl = this.clients[cmd.c];
        for (let i = 0; i < cmd.n && cl.wire.length; i++) {
          const text = cl.wire.shift()!;
          cl.remote.onFrame(readEngineFrame(text) ?? (JSON.parse(text) as { params: NotificationParams<'session.frame'> }).params);
        }
        break;
      }
      case 'clientCut': {
        const cl = this.clients[cmd.c];
        if (!cl.member) break;
        this.session.detach(cl.member.clientId);
        cl.member = undefined;
        cl.wire = [];
        break;
      }
      case 'clientResume': {
        const cl = this.clients[cmd.c];
        if (cl.member) break;
        this.connectClient(cl, cl.remote.lastSeq + 1);
        break;
      }
      case 'send': {
        const cl = this.clients[cmd.c];
        if (!cl.member || this.session.ended) break;
        const id = `input-${++this.inputNo}`;
        cl.lastInputId = id;
        const status = this.session.input(cl.member.clientId, id, { type: 'user', message: { role: 'user', content: id } });
        expect(status).toBe('applied');
        break;
      }
      case 'retry': {
        const cl = this.clients[cmd.c];
        if (!cl.member || !cl.lastInputId) break;
        this.retries.push(
          this.session.input(cl.member.clientId, cl.lastInputId, { type: 'user', message: { role: 'user', content: cl.lastInputId } }),
        );
        break;
      }
      case 'forgeAck': {
        // D5: an ack beyond what the agent sent is ignored; nothing is released.
        const before = this.relay.nextOutputSeq;
        const sent = this.relay.lastSentSeq;
        this.relay.ack(sent + 1 + cmd.k);
        expect(this.relay.nextOutputSeq).toBe(before);
        this.forgedAcksIgnored++;
        break;
      }
      case 'resumeBeyond': {
        // D2: a resume position beyond the last frame is a typed error, and attaches nothing.
        const pos = this.session.info().last_seq + 2 + cmd.k;
        const frames: string[] = [];
        const probe: Member = {
          clientId: 'probe',
          principal: 'alice',
          transport: 'memory',
          sendFrame: (b) => frames.push(b.toString('utf8')),
          sendReply: () => {},
        };
        expect(() => this.session.attach(probe, 'viewer', pos)).toThrow(TetherError);
        try {
          this.session.attach(probe, 'viewer', pos);
        } catch (err) {
          expect((err as TetherError).code).toBe('INVALID_ARGUMENT');
        }
        expect(frames).toEqual([]);
        expect(this.session.roleOf('probe')).toBeUndefined();
        this.resumesRefused++;
        break;
      }
    }
    await tick();
    // The agent holds at most its limit plus the item that crossed it (then the engine waits).
    expect(this.relay.unackedBytes).toBeLessThanOrEqual(this.maxUnackedBytes + 1024);
  }

  /** Links come back, everything in flight is delivered and acked, the engine exits; all drained. */
  async heal(): Promise<void> {
    let engineEnded = false;
    for (let round = 0; round < 10_000; round++) {
      if (!this.agentUp) await this.run({ t: 'agentReconnect', staleHello: false });
      for (let c = 0; c < CLIENTS; c++) if (!this.clients[c].member) await this.run({ t: 'clientResume', c });
      const busy =
        this.up.length || this.down.length || this.clients.some((c) => c.wire.length) || this.engine.unread || !this.relay.drained;
      if (!busy) {
        if (engineEnded) return;
        this.engine.end();
        engineEnded = true;
        await tick();
        continue;
      }
      await this.run({ t: 'deliverUp', n: 64 });
      await this.run({ t: 'gatewayAck' });
      await this.run({ t: 'deliverDown', n: 64 });
      for (let c = 0; c < CLIENTS; c++) await this.run({ t: 'deliverClient', c, n: 1_000 });
    }
    throw new Error('the model did not quiesce');
  }
}

/** Drains a finished RemoteSession's items. */
async function itemsOf(remote: RemoteSession) {
  const out: { seq: number; line?: string; event?: Record<string, unknown> }[] = [];
  for await (const item of remote) {
    if (item.kind === 'engine') out.push({ seq: item.seq, line: item.line });
    else if (item.kind === 'event') out.push({ seq: item.seq, event: item.event as unknown as Record<string, unknown> });
  }
  return out;
}

function checkWorld(w: World, items: Awaited<ReturnType<typeof itemsOf>>[]): { gaps: number } {
  const hist = w.history;
  // History is numbered 1..N with no hole.
  expect(hist.map((h) => h.seq)).toEqual(hist.map((_, n) => n + 1));
  // The engine's output, exactly once and in order: lines as written, invalid lines as engine_error events.
  const fromEngine = hist
    .filter((h) => h.params.origin === 'engine' || h.params.event?.subtype === 'engine_error')
    .map((h) => (h.params.origin === 'engine' ? h.line! : `invalid:${(h.params.event as { preview?: string }).preview}`));
  const wrote = w.engine.output.map((o) => (o.kind === 'frame' ? o.line : `invalid:${o.preview}`));
  expect(fromEngine).toEqual(wrote);
  const exited = hist.filter((h) => h.params.event?.subtype === 'exited');
  expect(exited).toHaveLength(1);
  expect(exited[0].seq).toBe(hist.length);

  // Inputs: each id written to the engine once, in the order of the prompt events.
  const promptOrder = hist
    .filter((h) => h.params.event?.subtype === 'prompt')
    .map((h) => (h.params.event as { message: { content: string } }).message.content);
  const written = w.engine.written.map((l) => (l.message as { content: string }).content);
  expect(written).toEqual(promptOrder);
  expect(new Set(written).size).toBe(written.length);
  expect(w.retries.every((r) => r === 'duplicate')).toBe(true);

  // Each client: its log equals history from where it joined; holes only behind an explicit gap.
  let gaps = 0;
  for (const list of items) {
    let expectNext = 1;
    let pendingGap: { from: number; to: number } | undefined;
    for (const item of list) {
      if (item.seq === 0) {
        const e = item.event as { subtype: string; from_seq: number; to_seq: number };
        expect(e.subtype).toBe('gap');
        expect(e.from_seq).toBe(expectNext);
        pendingGap = { from: e.from_seq, to: e.to_seq };
        gaps++;
        continue;
      }
      if (pendingGap) {
        expect(item.seq).toBe(pendingGap.to + 1);
        pendingGap = undefined;
      } else {
        expect(item.seq).toBe(expectNext);
      }
      const h = hist[item.seq - 1];
      if (item.line !== undefined) expect(item.line).toBe(h.line);
      else expect(item.event).toEqual(h.params.event);
      expectNext = item.seq + 1;
    }
    expect(expectNext).toBe(hist.length + 1);
  }
  return { gaps };
}

describe('seq/ack/resume model (fast-check, real relay, session, replay log and client dedupe)', () => {
  it(`holds under random interleavings of send, ack, disconnect and resume (${NUM_RUNS} runs)`, async () => {
    console.log(`resume-model: seed=${SEED} runs=${NUM_RUNS} (reproduce with TETHER_TEST_SEED=${SEED})`);
    let runs = 0;
    let gapRuns = 0;
    let forged = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(command, { minLength: 1, maxLength: 80 }),
        // Small replay logs make eviction (and so gaps) happen; large ones must never gap.
        fc.oneof(fc.constant(100_000), fc.integer({ min: 3, max: 40 })),
        // A small agent buffer makes backpressure on the engine happen; a large one keeps many frames in flight.
        fc.oneof(fc.constant(1024 * 1024), fc.integer({ min: 200, max: 4_000 })),
        async (cmds, replayFrames, maxUnackedBytes) => {
          const w = new World(replayFrames, maxUnackedBytes);
          for (const cmd of cmds) await w.run(cmd);
          await w.heal();
          const items = await Promise.all(w.clients.map((c) => itemsOf(c.remote)));
          const { gaps } = checkWorld(w, items);
          if (replayFrames === 100_000) expect(gaps).toBe(0);
          runs++;
          if (gaps) gapRuns++;
          forged += w.forgedAcksIgnored;
          refused += w.resumesRefused;
        },
      ),
      { seed: SEED, numRuns: NUM_RUNS },
    );
    console.log(
      `resume-model: ${runs} runs passed; ${gapRuns} ended with an explicit gap; ${forged} forged acks ignored; ${refused} resumes beyond the end refused`,
    );
  }, 60_000);
});
