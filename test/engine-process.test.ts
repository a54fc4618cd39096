import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { TetherError } from '../core/errors.js';
import { EngineProcess, type EngineLine, type EngineProcessOptions, type ExitInfo } from '../agent/engine-process.js';
import { EngineSet } from '../agent/engine-set.js';
import { LineSplitter, PREVIEW_MAX_CHARS, safePreview } from '../agent/line-splitter.js';
import { StderrTail } from '../agent/stderr-tail.js';
import { waitFor, withTimeout } from './support/wait.js';

const ENGINE = fileURLToPath(new URL('./support/misbehaving-engine.mjs', import.meta.url));
const MiB = 1024 * 1024;

const engines: EngineProcess[] = [];
const strayPids: number[] = [];

function start(mode: string, extra: string[] = [], opts: Partial<EngineProcessOptions> = {}): EngineProcess {
  const engine = EngineProcess.spawn({
    command: process.execPath,
    args: [ENGINE, '--mode', mode, ...extra],
    cwd: process.cwd(),
    env: process.env,
    ...opts,
  });
  engines.push(engine);
  return engine;
}

/** Starts a stand-in engine mode that says `{"type":"ready"}` first; resolves once it did, with its line iterator. */
async function startReady(
  mode: string,
  opts: Partial<EngineProcessOptions> = {},
): Promise<{ engine: EngineProcess; it: AsyncIterator<EngineLine> }> {
  const engine = start(mode, [], opts);
  const it = engine.lines()[Symbol.asyncIterator]();
  expect(frame(await next(it))).toEqual({ type: 'ready' });
  return { engine, it };
}

afterEach(async () => {
  for (const engine of engines.splice(0)) {
    engine.kill();
    await withTimeout(
      engine.exited.catch(() => undefined),
      5000,
      'engine exit in afterEach',
    ).catch(() => undefined);
  }
  for (const pid of strayPids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function next(it: AsyncIterator<EngineLine>, ms = 5000): Promise<EngineLine> {
  const r = await withTimeout(it.next(), ms, 'an engine line');
  if (r.done) throw new Error('engine stdout ended early');
  return r.value;
}

async function rest(it: AsyncIterator<EngineLine>, ms = 10_000): Promise<EngineLine[]> {
  const items: EngineLine[] = [];
  const drain = async () => {
    for (;;) {
      const r = await it.next();
      if (r.done) return items;
      items.push(r.value);
    }
  };
  return withTimeout(drain(), ms, 'the end of engine stdout');
}

function frame(item: EngineLine): Record<string, unknown> {
  if (item.kind !== 'frame') throw new Error(`expected a frame, got ${JSON.stringify(item)}`);
  return item.value;
}

/** Alive = exists and is not a zombie (PID 1 here may not reap orphans). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Whether `pid` is gone within `ms` (waits only as long as it is alive). */
function waitDead(pid: number, ms = 3000): Promise<boolean> {
  return waitFor(() => !isAlive(pid), ms, `pid ${pid} to die`).then(
    () => true,
    () => false,
  );
}

describe('LineSplitter', () => {
  const enc = (s: string) => Buffer.from(s, 'utf8');
  const sample = Buffer.concat([
    enc('{"a":1}\n'),
    enc('{"b":"héllo ✓ 😀"}\r\n'),
    enc('\n  \n'),
    enc('not json\n'),
    enc('[1]\n'),
    Buffer.from([0xc3, 0x28, 0x0a]),
    enc('{"last":true}'),
  ]);

  function splitWhole(buf: Buffer, cap = 1024): EngineLine[] {
    const s = new LineSplitter(cap);
    return s.end(s.push(buf));
  }

  it('gives the same items however the bytes are chunked', () => {
    const expected = splitWhole(sample);
    expect(expected.map((i) => (i.kind === 'frame' ? i.line : i.code))).toEqual([
      '{"a":1}',
      '{"b":"héllo ✓ 😀"}',
      'NOT_JSON',
      'NOT_OBJECT',
      'INVALID_UTF8',
      '{"last":true}',
    ]);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: sample.length }), { maxLength: 12 }), (cuts) => {
        const points = [...new Set([0, ...cuts, sample.length])].sort((a, b) => a - b);
        const s = new LineSplitter(1024);
        const out: EngineLine[] = [];
        for (let i = 1; i < points.length; i++) s.push(sample.subarray(points[i - 1], points[i]), out);
        s.end(out);
        expect(out).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('accepts a line at the cap, reports one over it at once and never buffers past it', () => {
    const s = new LineSplitter(10);
    expect(s.push(enc('{"a":"12"}\n'))).toMatchObject([{ kind: 'frame', line: '{"a":"12"}' }]);
    const out = s.push(enc('{"a":"123'));
    expect(out).toEqual([]);
    const over = s.push(enc('456789'));
    expect(over).toMatchObject([{ kind: 'invalid', code: 'LINE_TOO_LONG', bytes: 15 }]);
    for (let i = 0; i < 100; i++) expect(s.push(enc('x'.repeat(1000)))).toEqual([]);
    expect(s.bufferedBytes).toBe(0);
    expect(s.push(enc('"}\n{"ok":1}\n'))).toMatchObject([{ kind: 'frame', value: { ok: 1 } }]);
  });

  it('makes previews bounded and escapes invisible characters', () => {
    const p = safePreview(`\u0000\u001b[2J\u202e\u2028${'é'.repeat(500)}`);
    expect(p.length).toBeLessThanOrEqual(PREVIEW_MAX_CHARS);
    expect(p.startsWith('\\u0000\\u001b[2J\\u202e\\u2028é')).toBe(true);
    expect(p.endsWith('…')).toBe(true);
    expect(safePreview('😀'.repeat(150)).length).toBeLessThanOrEqual(PREVIEW_MAX_CHARS);
    expect(safePreview('x'.repeat(200))).toBe('x'.repeat(200));
  });
});

describe('StderrTail', () => {
  it('keeps the last bytes and drops a character cut at the wrap', () => {
    const tail = new StderrTail(8);
    tail.push(Buffer.from('abc'));
    expect(tail.text()).toBe('abc');
    tail.push(Buffer.from('defghij'));
    expect(tail.text()).toBe('cdefghij');
    tail.push(Buffer.from('0123456789'.repeat(1000)));
    expect(tail.text()).toBe('23456789');
    expect(tail.totalBytes).toBe(10_010);
    const cut = new StderrTail(5);
    cut.push(Buffer.from('xééé')); // 78 c3 a9 c3 a9 c3 a9: the kept 5 bytes start with a lone a9
    expect(cut.bytes()).toEqual(Buffer.from([0xa9, 0xc3, 0xa9, 0xc3, 0xa9]));
    expect(cut.text()).toBe('éé');
  });
});

describe('EngineProcess', () => {
  it('relays frames exactly; stop() is idempotent and resolves with code 0', async () => {
    const engine = start('echo');
    expect(engine.pid).toBeGreaterThan(0);
    const it = engine.lines()[Symbol.asyncIterator]();
    await withTimeout(engine.write({ type: 'user', text: 'hi ✓', n: 1 }), 5000, 'write');
    const item = await next(it);
    const echoed = '{"type":"echo","got":{"type":"user","text":"hi ✓","n":1}}';
    expect(item).toEqual({
      kind: 'frame',
      line: echoed,
      bytes: Buffer.from(echoed),
      value: { type: 'echo', got: { type: 'user', text: 'hi ✓', n: 1 } },
    });
    const p1 = engine.stop();
    const p2 = engine.stop();
    expect(p2).toBe(p1);
    let resolutions = 0;
    void p1.then(() => resolutions++);
    const info = await withTimeout(p1, 8000, 'stop');
    expect(info).toEqual({ code: 0, signal: null, stderrTail: '' });
    expect(engine.hasExited).toBe(true);
    expect(engine.stop()).toBe(p1);
    expect(await engine.exited).toBe(info);
    expect(await rest(it)).toEqual([]);
    await sleep(10);
    expect(resolutions).toBe(1);
  });

  it('crash: ExitInfo carries code, signal and the stderr tail; write after exit is refused', async () => {
    const engine = start('crash');
    const info = await withTimeout(engine.exited, 5000, 'exit');
    expect(info.code).toBe(3);
    expect(info.signal).toBeNull();
    expect(info.stderrTail).toContain('fatal: engine exploded on purpose');
    expect(engine.hasExited).toBe(true);
    await expect(engine.write({ type: 'user' })).rejects.toMatchObject({
      name: 'TetherError',
      code: 'FAILED_PRECONDITION',
    });
    expect(await rest(engine.lines()[Symbol.asyncIterator]())).toEqual([]);
    expect(await withTimeout(engine.stop(), 1000, 'stop')).toBe(info);
  });

  it('garbage: bad lines become bounded invalid items and the stream continues', async () => {
    const engine = start('garbage');
    const it = engine.lines()[Symbol.asyncIterator]();
    const items: EngineLine[] = [];
    for (let i = 0; i < 11; i++) items.push(await next(it));
    const summary = items.map((i) => (i.kind === 'frame' ? i.line : `${i.code}:${i.preview}`));
    expect(summary.slice(0, 8)).toEqual([
      'NOT_JSON:hello world',
      'NOT_JSON:{"unterminated": ',
      'NOT_OBJECT:[1,2,3]',
      'NOT_OBJECT:"just a string"',
      'NOT_OBJECT:42',
      'NOT_OBJECT:null',
      'INVALID_UTF8:7b2261223a22fffe227d',
      'INVALID_UTF8:eda080',
    ]);
    const long = items[8]!;
    expect(long).toMatchObject({ kind: 'invalid', code: 'NOT_JSON', bytes: 511 });
    if (long.kind !== 'invalid') throw new Error('unreachable');
    expect(long.preview.length).toBeLessThanOrEqual(PREVIEW_MAX_CHARS);
    expect(long.preview.startsWith('\\u001b[31mred\\u202exxx')).toBe(true);
    expect(long.preview).not.toMatch(/[\u0000-\u001f\u202e]/);
    for (const i of items) if (i.kind === 'invalid') expect(i.preview.length).toBeLessThanOrEqual(PREVIEW_MAX_CHARS);
    expect(items[9]).toEqual({
      kind: 'frame',
      line: '{"type":"crlf","n":1}',
      bytes: Buffer.from('{"type":"crlf","n":1}'),
      value: { type: 'crlf', n: 1 },
    });
    expect(frame(items[10]!)).toEqual({ type: 'after_garbage', text: 'héllo ✓ 😀' });
    const info = await withTimeout(engine.stop(), 8000, 'stop');
    expect(info.code).toBe(0);
  });

  it('a 10 MB line arrives intact with the default cap', async () => {
    const engine = start('huge-line', ['--size', String(10_000_000)]);
    const it = engine.lines()[Symbol.asyncIterator]();
    const huge = await next(it, 10_000);
    expect(huge.kind).toBe('frame');
    if (huge.kind !== 'frame') return;
    expect(huge.line.length).toBe(10_000_000);
    expect(huge.value.type).toBe('huge');
    expect((huge.value.pad as string).length).toBe(10_000_000 - '{"type":"huge","pad":""}'.length);
    expect(frame(await next(it))).toEqual({ type: 'after_huge' });
  });

  it('a 17 MiB line gives one LINE_TOO_LONG and the next line still arrives', async () => {
    const engine = start('huge-line', ['--size', String(17 * MiB)]);
    const it = engine.lines()[Symbol.asyncIterator]();
    const bad = await next(it, 10_000);
    expect(bad).toMatchObject({ kind: 'invalid', code: 'LINE_TOO_LONG' });
    if (bad.kind !== 'invalid') return;
    expect(bad.bytes).toBeGreaterThan(16 * MiB);
    expect(bad.preview.startsWith('{"type":"huge","pad":"aaa')).toBe(true);
    expect(bad.preview.length).toBeLessThanOrEqual(PREVIEW_MAX_CHARS);
    expect(frame(await next(it, 10_000))).toEqual({ type: 'after_huge' });
    expect(engine.stdoutBytesRead).toBeGreaterThanOrEqual(17 * MiB);
  });

  it('a never-ending line is reported when it crosses the cap, not buffered', async () => {
    const engine = start('endless-line', [], { maxLineBytes: MiB, eofGraceMs: 100, termGraceMs: 1000 });
    const it = engine.lines()[Symbol.asyncIterator]();
    const bad = await next(it, 5000);
    expect(bad).toMatchObject({ kind: 'invalid', code: 'LINE_TOO_LONG' });
    if (bad.kind !== 'invalid') return;
    expect(bad.bytes).toBeGreaterThan(MiB);
    expect(bad.bytes).toBeLessThanOrEqual(2 * MiB);
    const info = await withTimeout(engine.stop(), 5000, 'stop');
    expect(info).toMatchObject({ code: null, signal: 'SIGTERM' });
    expect(await rest(it)).toEqual([]);
  });

  it('ignore-sigterm: stop() escalates to SIGKILL after termGraceMs', async () => {
    const { engine } = await startReady('ignore-sigterm', { eofGraceMs: 300, termGraceMs: 300 });
    const t0 = performance.now();
    const info = await withTimeout(engine.stop(), 5000, 'stop');
    const elapsed = performance.now() - t0;
    expect(info.code).toBeNull();
    expect(info.signal).toBe('SIGKILL');
    expect(info.stderrTail).toContain('ignoring SIGTERM');
    expect(elapsed).toBeGreaterThanOrEqual(550);
    expect(elapsed).toBeLessThan(3000);
  });

  it("stop('SIGTERM') signals at once, skipping the EOF grace; SIGKILL follows after termGraceMs if ignored", async () => {
    const slow = start('ignore-sigterm', [], { eofGraceMs: 10_000, termGraceMs: 300 });
    expect(frame(await next(slow.lines()[Symbol.asyncIterator]()))).toEqual({ type: 'ready' });
    const t0 = performance.now();
    const info = await withTimeout(slow.stop('SIGTERM'), 5000, 'stop SIGTERM');
    expect(info.signal).toBe('SIGKILL');
    expect(info.stderrTail).toContain('ignoring SIGTERM');
    expect(performance.now() - t0).toBeLessThan(3000); // not the 10 s EOF grace
  });

  it("a harder stop escalates one in progress: stop() then stop('SIGKILL') kills at once", async () => {
    const engine = start('ignore-sigterm', [], { eofGraceMs: 10_000, termGraceMs: 10_000 });
    expect(frame(await next(engine.lines()[Symbol.asyncIterator]()))).toEqual({ type: 'ready' });
    const staged = engine.stop();
    const t0 = performance.now();
    const info = await withTimeout(engine.stop('SIGKILL'), 5000, 'stop SIGKILL');
    expect(await staged).toBe(info);
    expect(info.signal).toBe('SIGKILL');
    expect(performance.now() - t0).toBeLessThan(3000);
  });

  it('grandchild: a descendant in the group dies when the engine exits', async () => {
    const engine = start('grandchild', [], { eofGraceMs: 3000, termGraceMs: 1000 });
    const it = engine.lines()[Symbol.asyncIterator]();
    const { pid } = frame(await next(it)) as { pid: number };
    expect(typeof pid).toBe('number');
    strayPids.push(pid);
    expect(isAlive(pid)).toBe(true);
    // The engine exits 0 by itself on stdin EOF; its `sleep` holds stdout/stderr open.
    const info = await withTimeout(engine.stop(), 5000, 'stop');
    expect(info).toMatchObject({ code: 0, signal: null });
    expect(await waitDead(pid)).toBe(true);
  });

  it('exited still settles when an escaped descendant keeps the pipes open', async () => {
    const engine = start('grandchild', ['--escape'], { eofGraceMs: 3000, termGraceMs: 400 });
    const it = engine.lines()[Symbol.asyncIterator]();
    const { pid } = frame(await next(it)) as { pid: number };
    strayPids.push(pid);
    const t0 = performance.now();
    const info = await withTimeout(engine.stop(), 5000, 'stop');
    expect(info).toMatchObject({ code: 0, signal: null });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(350); // waited termGraceMs for the pipes
    expect(await rest(it)).toEqual([]);
    expect(isAlive(pid)).toBe(true); // out of our group: the agent cannot (and does not) reach it
  });

  it('slow-exit: the line written after stdin EOF is not lost by stop()', async () => {
    const { engine, it } = await startReady('slow-exit', { eofGraceMs: 3000, termGraceMs: 1000 });
    const t0 = performance.now();
    // Nobody pulls while stopping: the last line must still be there afterwards.
    const info = await withTimeout(engine.stop(), 5000, 'stop');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(900);
    expect(info).toMatchObject({ code: 0, signal: null });
    expect((await rest(it)).map(frame)).toEqual([{ type: 'final' }]);
  });

  it('stderr flood never blocks stdout; the tail is bounded; logging is rate-limited', async () => {
    let stderrRecords = 0;
    const logger = pino(
      { level: 'debug' },
      {
        write(line: string) {
          if (line.includes('"msg":"engine stderr"')) stderrRecords++;
        },
      },
    );
    const t0 = performance.now();
    const engine = start('stderr-flood', ['--size', String(64_000_000)], { stderrTailBytes: 4096, logger });
    const it = engine.lines()[Symbol.asyncIterator]();
    expect(frame(await next(it))).toEqual({ type: 'started' });
    expect(frame(await next(it, 10_000))).toEqual({ type: 'done' });
    const info = await withTimeout(engine.exited, 10_000, 'exit');
    const seconds = (performance.now() - t0) / 1000;
    expect(info.code).toBe(0);
    expect(Buffer.byteLength(info.stderrTail)).toBeLessThanOrEqual(4096);
    expect(info.stderrTail.endsWith('END-OF-STDERR-MARKER\n')).toBe(true);
    expect(stderrRecords).toBeGreaterThan(0);
    expect(stderrRecords).toBeLessThanOrEqual(50 * (Math.ceil(seconds) + 1));
  });

  it('flood: while nobody pulls the engine blocks on its pipe; nothing is lost', async () => {
    const engine = start('flood', ['--size', String(100_000_000)]);
    const it = engine.lines()[Symbol.asyncIterator]();
    for (let i = 0; i < 5; i++) expect(frame(await next(it))).toMatchObject({ type: 'flood', i });
    const rss0 = process.memoryUsage().rss;
    await sleep(400);
    const read1 = engine.stdoutBytesRead;
    const written1 = lastProgress(engine.stderrTail);
    await sleep(600);
    const read2 = engine.stdoutBytesRead;
    const written2 = lastProgress(engine.stderrTail);
    expect(read2).toBe(read1);
    expect(read1).toBeLessThan(4 * MiB);
    expect(written2).toBe(written1); // the engine is blocked, not writing somewhere into our memory
    expect(written1).toBeLessThan(8 * MiB);
    expect(process.memoryUsage().rss - rss0).toBeLessThan(64 * MiB);

    let expectedI = 5;
    let end: Record<string, unknown> | undefined;
    for (const item of await rest(it, 15_000)) {
      const value = frame(item);
      if (value.type === 'flood') expect(value.i).toBe(expectedI++);
      else end = value;
    }
    expect(end).toEqual({ type: 'flood_end', count: expectedI });
    expect((await withTimeout(engine.exited, 5000, 'exit')).code).toBe(0);
  });

  it('write refuses non-objects and reports a closed stdin (EPIPE) as FAILED_PRECONDITION', async () => {
    const echo = start('echo');
    const bad: unknown[] = [[1, 2], null, 'x', 42, new Date(), new Map(), { n: 1n }];
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    bad.push(circular);
    for (const value of bad) {
      await expect(echo.write(value as Record<string, unknown>)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }

    const { engine } = await startReady('no-stdin', { eofGraceMs: 100, termGraceMs: 300 });
    const err = await withTimeout(engine.write({ type: 'user' }), 5000, 'write').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TetherError);
    expect(err).toMatchObject({ code: 'FAILED_PRECONDITION' });
    expect(engine.hasExited).toBe(false);
  });

  it('write honours stdin backpressure, and a pending write fails when the engine dies', async () => {
    const echo = start('echo');
    const echoLines = echo.lines()[Symbol.asyncIterator]();
    const pad = 'x'.repeat(4_000_000);
    const pulled = next(echoLines, 10_000);
    await withTimeout(echo.write({ type: 'big', pad }), 10_000, 'big write to echo');
    const back = frame(await pulled);
    expect((back.got as { pad: string }).pad.length).toBe(pad.length);

    const { engine } = await startReady('no-read');
    let state = 'pending';
    const write = engine.write({ type: 'big', pad }).then(
      () => (state = 'resolved'),
      (e: unknown) => {
        state = 'rejected';
        throw e;
      },
    );
    await sleep(300);
    expect(state).toBe('pending');
    engine.kill();
    await expect(withTimeout(write, 5000, 'write after kill')).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    expect((await withTimeout(engine.exited, 5000, 'exit')).signal).toBe('SIGKILL');
    await expect(engine.write({ type: 'again' })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
  });

  it('a command that does not exist: exited and stop() reject with FAILED_PRECONDITION', async () => {
    const engine = EngineProcess.spawn({
      command: '/nonexistent/tether-engine',
      args: ['--x'],
      cwd: process.cwd(),
      env: process.env,
    });
    engines.push(engine);
    expect(engine.pid).toBe(0);
    const early = engine.write({ type: 'user' }); // before Node has reported ENOENT
    const err = await withTimeout(engine.exited, 5000, 'exited').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TetherError);
    expect(err).toMatchObject({ code: 'FAILED_PRECONDITION', details: { errno: 'ENOENT' } });
    expect((err as Error).message).toMatch(/^cannot start engine "\/nonexistent\/tether-engine": .*ENOENT/);
    expect(engine.hasExited).toBe(true);
    await expect(engine.stop()).rejects.toBe(err);
    await expect(early).rejects.toBe(err);
    await expect(engine.write({ type: 'user' })).rejects.toBe(err);
    expect(await rest(engine.lines()[Symbol.asyncIterator]())).toEqual([]);
    engine.kill(); // no-op, must not signal pid 0
  });

  it("kill() and EngineSet.killAll() SIGKILL the group at once; only the set's engines, and each leaves it as it exits", async () => {
    const a = start('echo');
    a.kill();
    expect((await withTimeout(a.exited, 5000, 'exit')).signal).toBe('SIGKILL');
    const set = new EngineSet();
    const b = start('ignore-sigterm', [], { engineSet: set });
    const c = start('echo', [], { engineSet: set });
    const outside = start('ignore-sigterm');
    expect(set.size).toBe(2);
    await next(b.lines()[Symbol.asyncIterator]()); // b is up
    await next(outside.lines()[Symbol.asyncIterator]());
    set.killAll();
    const infos: ExitInfo[] = await withTimeout(Promise.all([b.exited, c.exited]), 5000, 'exits');
    expect(infos.map((i) => i.signal)).toEqual(['SIGKILL', 'SIGKILL']);
    expect(set.size).toBe(0);
    expect(outside.hasExited).toBe(false); // another program's engine is not this set's to kill
  });

  it('abandoning lines() drains the rest without blocking the engine; lines() is single-use', async () => {
    const engine = start('flood', ['--size', String(20_000_000)]);
    const iterable = engine.lines();
    expect(() => engine.lines()).toThrow(TetherError);
    for await (const item of iterable) {
      expect(frame(item)).toMatchObject({ type: 'flood', i: 0 });
      break;
    }
    const info = await withTimeout(engine.exited, 10_000, 'exit');
    expect(info.code).toBe(0);
    expect(engine.stdoutBytesRead).toBeGreaterThanOrEqual(20_000_000);
  });
});

function lastProgress(tail: string): number {
  const all = [...tail.matchAll(/progress (\d+)/g)];
  return all.length ? Number(all[all.length - 1]![1]) : 0;
}
