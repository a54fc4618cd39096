/**
 * Nothing lost, nothing doubled (issue 6): the fault proxy sits between clients and the
 * gateway, or between the agent and the gateway, on both transports, and cuts the link many
 * times while the demo engine streams. Clients and the agent reconnect by themselves. Every
 * client's frames must equal an uninterrupted reference client's (same seqs, same bytes, same
 * order), the reference's engine lines must equal what the engine wrote to stdout, and every
 * prompt, including those sent across a cut, must reach the engine exactly once.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Agent } from '../agent/agent.js';
import { GatewayClient } from '../client/gateway-client.js';
import type { RemoteSession } from '../client/remote-session.js';
import type { GatewayLimits } from '../gateway/gateway.js';
import { FaultProxy, type Direction } from './support/fault-proxy.js';
import { makeTempDir } from './support/claude-cli.js';
import { compareViews, engineOutput, record, teeEngine, type Recording, type Seen } from './support/recorder.js';
import { startStack, withTimeout, type Stack, type TransportName } from './support/stack.js';
import { waitFor } from './support/wait.js';
import { randomInt, testRandom } from './support/seed.js';
import { cleanupsPerTest, type Cleanups } from './support/cleanups.js';

const FAST_BACKOFF = { initialMs: 20, factor: 1.5, maxMs: 150, jitter: 0.2 };
/** Heartbeats short enough that a half-open link is noticed within about a second, on both transports. */
const FAST_PING = { ws: { pingIntervalMs: 300, pingTimeoutMs: 700 }, connectTimeoutMs: 3_000 };
const HEARTBEAT = { intervalMs: 300, timeoutMs: 700 };
const CUTS_PER_RUN = 14;
const MAX_SLOW_TURNS = 6;
const AGENT = 'fault-agent';

const totals = {
  runs: 0,
  cuts: 0,
  framesChecked: 0,
  lost: 0,
  duplicated: 0,
  changed: 0,
  promptsTwice: 0,
  promptsLost: 0,
  promptsAcrossCuts: 0,
  wireReplays: 0,
  agentReplays: 0,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The current test's fault schedule: from the run's seed (TETHER_TEST_SEED replays it). */
const rand = (lo: number, hi: number) => randomInt(testRandom(), lo, hi);

interface Run {
  stack: Stack;
  proxy: FaultProxy;
  agent: Agent;
  teeDir: string;
  reference: { session: RemoteSession; rec: Recording };
  /** Clients whose link goes through the proxy (client leg only). */
  proxied: { client: GatewayClient; session: RemoteSession; rec: Recording }[];
  /** Connections that must be open through the proxy when the links are up. */
  expectOpen: number;
  /** Link status changes of the proxied peers (bounded), printed when a run fails. */
  events: string[];
}

function note(events: string[], what: string): void {
  events.push(`${new Date().toISOString().slice(17, 23)} ${what}`);
  if (events.length > 300) events.shift();
}

describe('fault injection: cuts on the client and agent links', () => {
  const cleanups = cleanupsPerTest({ tolerant: true });
  afterAll(() => {
    console.log(
      `fault-injection summary: runs=${totals.runs} cuts injected=${totals.cuts} frames checked=${totals.framesChecked} ` +
        `frames lost=${totals.lost} frames duplicated=${totals.duplicated} frames changed=${totals.changed} ` +
        `prompts applied twice=${totals.promptsTwice} prompts lost=${totals.promptsLost} prompts sent across a cut=${totals.promptsAcrossCuts} ` +
        `(re-sent and dropped by dedupe: ${totals.wireReplays} at clients, ${totals.agentReplays} agent lines at the gateway)`,
    );
  });

  it('the proxy itself: exact byte cuts, stall/resume, half-open, refuse, listing', async () => {
    const { createServer, connect } = await import('node:net');
    const received: Buffer[] = [];
    const echo = createServer((s) => {
      s.on('data', (d) => received.push(d));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => echo.close(() => r())));
    const proxy = await FaultProxy.start({ targetPort: (echo.address() as { port: number }).port });
    cleanups.push(() => proxy.close());
    const sock = connect(proxy.port, '127.0.0.1');
    sock.on('error', () => {});
    const closed = new Promise((r) => sock.on('close', r));
    await new Promise((r) => sock.on('connect', r));
    proxy.stall('up');
    sock.write(Buffer.alloc(100, 1));
    await sleep(50);
    expect(Buffer.concat(received).length).toBe(0);
    const cut = proxy.cutAfter('up', 150);
    proxy.resume('up');
    sock.write(Buffer.alloc(100, 2));
    const conn = await cut;
    await withTimeout(closed, 2_000, 'the cut to reach the client socket');
    await sleep(50);
    expect(Buffer.concat(received).length).toBe(150);
    expect(conn).toMatchObject({ state: 'closed', closedBy: 'cut', bytes: { up: 150 } });

    // A cut that falls exactly on the end of a chunk fires too.
    const s1 = connect(proxy.port, '127.0.0.1');
    s1.on('error', () => {});
    await new Promise((r) => s1.on('connect', r));
    const exact = proxy.cutAfter('up', 64);
    s1.write(Buffer.alloc(64, 3));
    expect(await withTimeout(exact, 2_000, 'a cut on a chunk boundary')).toMatchObject({ closedBy: 'cut', bytes: { up: 64 } });
    await withTimeout(new Promise((r) => (s1.destroyed ? r(undefined) : s1.on('close', r))), 2_000, 'the boundary cut to close the socket');

    const s2 = connect(proxy.port, '127.0.0.1');
    s2.on('error', () => {});
    await proxy.waitFor(() => proxy.open.length === 1, 2_000, 'second connection');
    expect(proxy.halfOpen()).toBe(1);
    s2.write('lost in the blackhole');
    await sleep(50);
    expect(Buffer.concat(received).length).toBe(150 + 64);
    expect(s2.destroyed).toBe(false);
    expect(proxy.connections.map((c) => c.state)).toEqual(['closed', 'closed', 'half-open']);
    s2.destroy();

    proxy.refuse(true);
    const s3 = connect(proxy.port, '127.0.0.1');
    s3.on('error', () => {});
    await withTimeout(new Promise((r) => s3.on('close', r)), 2_000, 'a refused connection to close');
    expect(proxy.refused).toBe(1);
  });

  it("a cut inside the re-attach that follows a reconnect does not end the client's session (ws)", async () => {
    const run = await startRun('ws', 'client', cleanups, 0);
    const client = await GatewayClient.connect({
      gateway: run.proxy.url('ws'),
      token: run.stack.token,
      backoff: FAST_BACKOFF,
      reconnectWaitMs: 10_000,
    });
    cleanups.push(() => client.close());
    const session = await client.attach(run.reference.session.id);
    const rec = record(session);
    // One clean reconnect to learn how many bytes a reconnect sends up: upgrade, hello, attach.
    run.proxy.cutAll();
    await run.proxy.waitFor(() => run.proxy.accepted >= 2, 5_000, 'the reconnect');
    await withTimeout(client.listSessions(), 5_000, 'the resume');
    const conn = run.proxy.connections.at(-1)!;
    const upgradeHelloAttach = conn.bytes.up - 60; // minus the listSessions request (~60 bytes framed)
    // Next reconnect: cut 30 bytes before the end of the attach request.
    run.proxy.cutAll();
    const cut = run.proxy.cutAfter('up', upgradeHelloAttach - 30, { timeoutMs: 5_000 });
    const cutConn = await cut;
    expect(cutConn.bytes.down).toBeGreaterThan(200); // the hello was answered: the cut fell in the resume's attach
    await run.proxy.waitFor(() => run.proxy.open.length >= 1, 5_000, 'the reconnect after the cut re-attach');
    await run.reference.session.sendUserMessage('after the cut re-attach');
    await waitFor(() => rec.items.some((i) => i.body.startsWith('{"type":"result"')), 10_000, 'the proxied client to see the result');
    await endAndCompareWithReference(run, rec);
  }, 30_000);

  it('a resume refused with a retryable error (the session is full) is retried after a reconnect, not dropped', async () => {
    const run = await startRun('ws', 'client', cleanups, 0, { maxMembers: 2 }); // the reference and one more
    const statuses: string[] = [];
    const client = await GatewayClient.connect({
      gateway: run.proxy.url('ws'),
      token: run.stack.token,
      backoff: FAST_BACKOFF,
      reconnectWaitMs: 10_000,
      onStatus: (st) => statuses.push(st.state === 'down' ? `down: ${st.error.message}` : st.state),
    });
    cleanups.push(() => client.close());
    const rec = record(await client.attach(run.reference.session.id));
    // The link drops; while the proxy keeps it down, someone else takes the free slot.
    run.proxy.refuse(true);
    run.proxy.cutAll();
    const other = await run.stack.client();
    const taken = await other.attach(run.reference.session.id, { readOnly: true });
    run.proxy.refuse(false);
    await waitFor(() => statuses.some((st) => st.includes('resume failed')), 5_000, 'the resume to be refused');
    expect(rec.items.length).toBeGreaterThan(0);
    // The slot frees up: the client resumes by itself and misses nothing.
    await other.detach(taken);
    await run.reference.session.sendUserMessage('after the refused resume');
    await waitFor(() => rec.items.some((i) => i.body.startsWith('{"type":"result"')), 10_000, 'the client to resume and see the result');
    await endAndCompareWithReference(run, rec);
  }, 30_000);

  for (const transport of ['ws', 'grpc'] as const satisfies readonly TransportName[]) {
    for (const leg of ['client', 'agent'] as const) {
      it(`${leg} link over ${transport}: ${CUTS_PER_RUN}+ cuts mid-stream, every client sees the engine's output exactly once`, async () => {
        const run = await startRun(transport, leg, cleanups);
        const stats = await exercise(run, transport, leg).catch((err: Error) => {
          console.log(
            `${leg} leg over ${transport} failed; link events:\n${run.events.join('\n')}\nproxy connections: ${JSON.stringify(run.proxy.connections.slice(-10))}`,
          );
          throw err;
        });
        totals.runs++;
        totals.cuts += stats.cuts;
        totals.promptsAcrossCuts += stats.acrossCuts;
        expect(stats.cuts).toBeGreaterThanOrEqual(CUTS_PER_RUN);
      }, 40_000);
    }
  }
});

/** Stops the reference session, lets both streams end, and checks `rec` saw exactly what the reference saw. */
async function endAndCompareWithReference(run: Run, rec: Recording): Promise<void> {
  await run.reference.session.stop();
  expect(await withTimeout(rec.done, 10_000, 'the end of the stream')).toBeUndefined();
  await withTimeout(run.reference.rec.done, 10_000, 'the reference to end');
  expect(compareViews(run.reference.rec.items, rec.items)).toMatchObject({ lost: 0, duplicated: 0, changed: 0, gaps: 0 });
}

async function startRun(
  transport: TransportName,
  leg: 'client' | 'agent',
  cleanups: Cleanups,
  proxiedClients = 2,
  limits: Partial<GatewayLimits> = {},
): Promise<Run> {
  const events: string[] = [];
  const teeDir = makeTempDir('tether-tee-');
  const cwd = makeTempDir('tether-cwd-');
  cleanups.push(
    () => teeDir.cleanup(),
    () => cwd.cleanup(),
  );
  const stack = await startStack({
    engine: 'demo',
    agentTransport: transport,
    clientTransport: transport,
    agentOptions: { backoff: FAST_BACKOFF },
    limits: { heartbeat: { intervalMs: 500, timeoutMs: 1_000 }, ...limits },
  });
  cleanups.push(() => stack.stop());
  const tokens = { client: stack.token, agent: stack.key ? await stack.mint({ kind: 'agent', sub: AGENT }) : undefined };
  const direct = transport === 'ws' ? stack.wsUrl : stack.grpcUrl;
  const targetPort = transport === 'ws' ? stack.server.port : stack.server.grpcPort!;
  // A little latency with jitter on every chunk (B11), on top of the cuts.
  const proxy = await FaultProxy.start({ targetPort, latencyMs: 1, jitterMs: 4 });
  cleanups.push(() => proxy.close());

  const agent = new Agent({
    gateway: leg === 'agent' ? proxy.url(transport) : direct,
    name: AGENT,
    token: tokens.agent,
    engine: 'claude',
    engineCommand: teeEngine(teeDir.path),
    cwd: cwd.path,
    backoff: FAST_BACKOFF,
    dial: FAST_PING,
    heartbeat: HEARTBEAT,
    eofGraceMs: 1_000,
    termGraceMs: 1_000,
    onStatus: (st) => note(events, `agent ${st.state}${st.state === 'down' ? `: ${st.error.code} ${st.error.message}` : ''}`),
  });
  await agent.start();
  cleanups.push(() => agent.shutdown(1_000));

  const refClient = await stack.client();
  const refSession = await refClient.createSession({ agent: AGENT, options: { include_partial_messages: true } });
  const reference = { session: refSession, rec: record(refSession) };
  // Count agent output the gateway receives again after a reconnect (and drops as already seen).
  const gw = stack.gateway.directory.get(refSession.id)!;
  const onEngineLine = gw.onEngineLine.bind(gw);
  gw.onEngineLine = (...args: Parameters<typeof onEngineLine>) => {
    const applied = onEngineLine(...args);
    if (!applied) totals.agentReplays++;
    return applied;
  };

  const proxied: Run['proxied'] = [];
  if (leg === 'client') {
    for (let n = 0; n < proxiedClients; n++) {
      const client = await GatewayClient.connect({
        gateway: proxy.url(transport),
        token: tokens.client,
        backoff: FAST_BACKOFF,
        reconnectWaitMs: 15_000,
        dial: FAST_PING,
        heartbeat: HEARTBEAT,
        onStatus: (st) => note(events, `client ${n} ${st.state}${st.state === 'down' ? `: ${st.error.code} ${st.error.message}` : ''}`),
      });
      cleanups.push(() => client.close());
      const session = await client.attach(refSession.id);
      proxied.push({ client, session, rec: record(session) });
    }
  }
  return { stack, proxy, agent, teeDir: teeDir.path, reference, proxied, expectOpen: leg === 'client' ? proxiedClients : 1, events };
}

/** The direction that carries the session's stream on this leg, and the one that carries requests/acks. */
function directions(leg: 'client' | 'agent'): { heavy: Direction; light: Direction } {
  return leg === 'client' ? { heavy: 'down', light: 'up' } : { heavy: 'up', light: 'down' };
}

/** Waits until every proxied link is open again. */
function linksUp(run: Run, ms = 8_000): Promise<void> {
  return run.proxy
    .waitFor(() => run.proxy.open.length >= run.expectOpen, ms, `${run.expectOpen} open link(s) through the proxy`)
    .catch((err: Error) => {
      throw new Error(`${err.message}; connections: ${JSON.stringify(run.proxy.connections.slice(-6))}`);
    });
}

/** Waits until every proxied client has reconnected and resumed (its calls go through again). */
async function settled(run: Run): Promise<void> {
  await linksUp(run);
  await Promise.all(run.proxied.map((p) => withTimeout(p.client.listSessions(), 8_000, 'a proxied client to be connected again')));
}

/** Cuts the proxied links again and again until told to stop: at byte offsets in either direction, on timers, and half-open. */
async function cutter(run: Run, leg: 'client' | 'agent', stop: () => boolean): Promise<void> {
  const { heavy, light } = directions(leg);
  let n = 0;
  while (!stop()) {
    await linksUp(run);
    await sleep(rand(20, 200));
    if (stop()) break;
    const kind = n++ % 5;
    if (kind === 0 || kind === 3) {
      // Mid-frame in the direction that carries the stream.
      await run.proxy
        .cutAfter(heavy, rand(1, 12_000), { timeoutMs: 1_500, mode: kind === 3 ? 'fin' : 'rst' })
        .catch(() => run.proxy.cutAll());
    } else if (kind === 1) {
      // The other direction: requests and hellos (client leg), acks and inputs (agent leg).
      await run.proxy.cutAfter(light, rand(1, 1_500), { timeoutMs: 800 }).catch(() => run.proxy.cutAll());
    } else if (kind === 4) {
      // Half-open: nothing flows and nothing closes; the dialing side's heartbeat must notice.
      // Only links past their hello: one blackholed during the hello waits out the hello's own
      // 10 s timeout instead (the heartbeat starts after the hello), too slow for this budget.
      const opened = run.proxy.accepted;
      if (run.proxy.halfOpen((c) => Date.now() - c.openedAt > 1_000) > 0) {
        run.proxy.cutsDone++;
        await run.proxy.waitFor(() => run.proxy.accepted > opened, 5_000, 'a reconnect after the half-open link');
      }
    } else {
      run.proxy.cutAll();
    }
  }
}

const isPromptEvent = (i: Seen) => i.origin === 'gateway' && i.body.includes('"subtype":"prompt"');
const engineResults = (lines: string[]) => lines.filter((l) => l.startsWith('{"type":"result"'));

/** Counts frames in `rec` so far that satisfy `pred`. */
function count(rec: Recording, pred: (i: Seen) => boolean): number {
  return rec.items.filter(pred).length;
}

async function exercise(run: Run, transport: TransportName, leg: 'client' | 'agent') {
  const { proxy, reference } = run;
  const ref = reference.rec;
  const prompts: string[] = [];
  const cutsBefore = proxy.cutsDone;
  const resultsSeen = () => count(ref, (i) => i.origin === 'engine' && i.body.startsWith('{"type":"result"'));
  const sender = (n: number): RemoteSession => (run.proxied.length ? run.proxied[n % run.proxied.length].session : reference.session);

  // 1. Slow streamed turns while the cutter works, until enough cuts were made.
  let stopCutting = false;
  const cutting = cutter(run, leg, () => stopCutting);
  for (let turn = 0; turn < MAX_SLOW_TURNS && (turn < 2 || proxy.cutsDone - cutsBefore < CUTS_PER_RUN); turn++) {
    const text = `a slow turn ${turn} on the ${leg} leg`;
    prompts.push(text);
    const want = resultsSeen() + 1;
    await withTimeout(sender(turn).sendUserMessage(text), 15_000, `prompt ${turn} to be accepted`);
    await waitFor(() => resultsSeen() >= want, 15_000, `the result of slow turn ${turn}`);
  }
  stopCutting = true;
  await withTimeout(cutting, 20_000, 'the cutter to stop');
  await settled(run);

  // 2. Prompts sent across a cut.
  let acrossCuts = 0;
  const promptEvents = (text: string) => count(ref, (i) => isPromptEvent(i) && i.body.includes(text));
  const engineSaw = (text: string) => engineOutput(run.teeDir).some((l) => l.startsWith('{"type":"result"') && l.includes(text));
  if (leg === 'client') {
    // a) The gateway applied it but the answer is lost in the cut: the retry must be a duplicate.
    const a = `across-a-cut answer-lost ${transport}`;
    prompts.push(a);
    proxy.stall('down');
    const sent = sender(0).sendUserMessage(a);
    sent.catch(() => {}); // awaited below
    await waitFor(() => promptEvents(a) === 1, 5_000, 'the gateway to apply the prompt');
    proxy.cutAll();
    proxy.resume('down');
    expect(await withTimeout(sent, 10_000, 'the retried prompt')).toBe('duplicate');
    await settled(run);
    // b) Sent while the link is down: it waits for the reconnect and goes out once.
    const b = `across-a-cut link-down ${transport}`;
    prompts.push(b);
    proxy.refuse(true);
    proxy.cutAll();
    const later = sender(1).sendUserMessage(b);
    later.catch(() => {}); // awaited below
    await sleep(300);
    proxy.refuse(false);
    expect(await withTimeout(later, 10_000, 'the prompt sent while down')).toBe('applied');
    await settled(run);
    // c) The request itself is cut mid-frame: the retry is applied once.
    const c = `across-a-cut request-cut ${transport}`;
    prompts.push(c);
    const cutReq = proxy.cutAfter('up', 40, { timeoutMs: 5_000 });
    const third = sender(0).sendUserMessage(c);
    third.catch(() => {}); // awaited below
    await cutReq;
    await withTimeout(third, 10_000, 'the prompt whose request was cut');
    acrossCuts += 3;
  } else {
    // a) The input never reached the agent: the gateway re-sends it after the reconnect.
    const a = `across-a-cut input-lost ${transport}`;
    prompts.push(a);
    proxy.stall('down');
    await reference.session.sendUserMessage(a);
    await sleep(100);
    proxy.cutAll();
    proxy.resume('down');
    await waitFor(() => engineSaw(a), 10_000, 'the engine to run the re-sent prompt');
    // b) The agent wrote it to the engine, but its input_ack is lost: the gateway must not re-send it.
    const b = `across-a-cut ack-lost ${transport}`;
    prompts.push(b);
    await linksUp(run);
    proxy.stall('up');
    await reference.session.sendUserMessage(b);
    await waitFor(() => engineSaw(b), 10_000, 'the engine to run the prompt');
    proxy.cutAll();
    proxy.resume('up');
    acrossCuts += 2;
  }
  await linksUp(run);
  await waitFor(() => resultsSeen() >= prompts.length, 15_000, 'every prompt to have its result');

  // 3. End the session; everyone reads to the exited event.
  await sleep(200);
  await reference.session.stop();
  const recs = [ref, ...run.proxied.map((p) => p.rec)];
  const errors = await withTimeout(Promise.all(recs.map((r) => r.done)), 15_000, 'every client to read to the end');
  expect(errors.map((e) => e?.message)).toEqual(recs.map(() => undefined));

  // 4. Compare. The reference is contiguous from 1 with no gap.
  const seqs = ref.items.map((i) => i.seq);
  expect(seqs).toEqual(seqs.map((_, n) => n + 1));
  const engineLines = engineOutput(run.teeDir);
  const refEngine = ref.items.filter((i) => i.origin === 'engine').map((i) => i.body);
  const engineCmp = compareLines(engineLines, refEngine);
  totals.lost += engineCmp.lost;
  totals.duplicated += engineCmp.duplicated;
  totals.framesChecked += refEngine.length;
  expect(engineCmp, 'reference engine lines vs engine stdout').toEqual({ lost: 0, duplicated: 0, equal: true });
  for (const p of run.proxied) {
    const cmp = compareViews(ref.items, p.rec.items);
    totals.framesChecked += cmp.checked;
    totals.lost += cmp.lost + cmp.gaps;
    totals.duplicated += cmp.duplicated;
    totals.changed += cmp.changed;
    totals.wireReplays += p.rec.wire.length - new Set(p.rec.wire).size;
    expect(cmp, 'a proxied client vs the reference').toEqual({
      checked: ref.items.length,
      lost: 0,
      duplicated: 0,
      changed: 0,
      gaps: 0,
      outOfOrder: 0,
    });
  }
  // Each prompt: one prompt event, and the engine ran exactly as many turns as prompts.
  for (const text of prompts) {
    const n = promptEvents(text);
    if (n > 1) totals.promptsTwice += n - 1;
    if (n === 0) totals.promptsLost++;
    expect(n, `prompt events for "${text}"`).toBe(1);
  }
  const results = engineResults(engineLines).length;
  if (results > prompts.length) totals.promptsTwice += results - prompts.length;
  expect(results, 'results the engine wrote').toBe(prompts.length);
  for (const text of prompts.filter((t) => t.startsWith('across-a-cut'))) {
    expect(
      engineResults(engineLines).filter((l) => l.includes(text)),
      `engine results for "${text}"`,
    ).toHaveLength(1);
  }
  return { cuts: proxy.cutsDone - cutsBefore, acrossCuts };
}

/** The engine's stdout lines vs the engine lines a client saw, in order. */
function compareLines(engine: string[], seen: string[]): { lost: number; duplicated: number; equal: boolean } {
  const counts = new Map<string, number>();
  for (const l of engine) counts.set(l, (counts.get(l) ?? 0) + 1);
  let duplicated = 0;
  for (const l of seen) {
    const c = counts.get(l) ?? 0;
    if (c === 0) duplicated++;
    else counts.set(l, c - 1);
  }
  let lost = 0;
  for (const c of counts.values()) lost += c;
  return { lost, duplicated, equal: engine.length === seen.length && engine.every((l, n) => l === seen[n]) };
}
