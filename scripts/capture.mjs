#!/usr/bin/env node
// npm run capture: re-records engine transcripts (test/fixtures/engine, format in its README)
// from the real Claude Code CLI and the scripted Messages API (test/support/fake-anthropic.ts),
// so a new CLI release can be captured the same way the ones in the tree were.
//
// Each scenario is driven by its own stored transcript: the host side (`in` frames, notes such
// as stdin EOF or SIGTERM) is replayed against the CLI, each frame written once the CLI has
// written the frames the transcript shows before it (matched by type and subtype, counted);
// answers to the CLI's own requests get the new run's request and tool-use ids. The argv,
// extra environment and model script come from NAME.meta.json. What the CLI writes is recorded
// afresh, with the README's placeholders, as NAME.ndjson + NAME.meta.json.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURES = join(ROOT, 'test', 'fixtures', 'engine');
/**
 * Transcripts this script does not re-record faithfully yet, and why. Every other transcript
 * in test/fixtures/engine is re-recorded (and, with --check, matched) by it.
 */
const NOT_SCRIPTED = {
  '82c_session_id_in_use': 'depends on session state the original capture left in its shared HOME',
  '91_api_error_401': "the fake answers the CLI's side calls successfully, so the 401 turn goes differently",
};
const SCRIPTED = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.ndjson'))
  .map((f) => f.slice(0, -'.ndjson'.length))
  .filter((n) => !(n in NOT_SCRIPTED))
  .sort();
const WAIT_MS = 30_000;

const USAGE = `npm run capture -- [options]

Re-records engine transcripts from the real CLI and the scripted Messages API.

Options:
  --cli PATH       the CLI binary (default: the one the SDK devDependency ships)
  --only A,B       scenarios to capture (default: all ${SCRIPTED.length} transcripts but
                   ${Object.keys(NOT_SCRIPTED).join(', ')}; about 2 minutes)
  --out DIR        where to write NAME.ndjson and NAME.meta.json (default: a new temp folder;
                   --out test/fixtures/engine replaces the transcripts in the tree)
  --check          compare each capture with the stored transcript (the sequence of frame
                   types and subtypes, and the exit code); exit 1 on a difference
  -h, --help       this text`;

function cliPath() {
  const require = createRequire(import.meta.url);
  const sdk = createRequire(require.resolve('@anthropic-ai/claude-agent-sdk'));
  for (const p of [
    `@anthropic-ai/claude-agent-sdk-${process.platform}-${process.arch}`,
    `@anthropic-ai/claude-agent-sdk-${process.platform}-${process.arch}-musl`,
  ]) {
    try {
      return sdk.resolve(`${p}/claude`);
    } catch {
      // next candidate
    }
  }
  throw new Error("no CLI binary found in the SDK's platform packages: pass --cli PATH");
}

/** The scripted fake Messages API, compiled from its TypeScript source for this process. */
async function loadFake(workDir) {
  const ts = (await import('typescript')).default;
  const source = readFileSync(join(ROOT, 'test', 'support', 'fake-anthropic.ts'), 'utf8');
  const out = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  const file = join(workDir, 'fake-anthropic.mjs');
  writeFileSync(file, out);
  return import(pathToFileURL(file).href);
}

/**
 * The transcripts' model scripts in the fake's terms: `default` is `fallback`, `error:
 * {status, message}` is `error_status` / `error_message`; `chunks` (how many pieces the text
 * streamed in) is left to the fake's own splitting.
 */
function fakeScenario(script = { responses: [] }) {
  const one = (r) => {
    const { error, chunks: _chunks, ...rest } = r;
    return { ...rest, ...(error ? { error_status: error.status, error_message: error.message } : {}) };
  };
  return { responses: (script.responses ?? []).map(one), ...(script.default ? { fallback: one(script.default) } : {}) };
}

/** Runs of stream_event frames count as one: how the text is chunked varies run to run. */
function shapeOf(lines) {
  const out = [];
  for (const l of lines) {
    if (l.dir !== 'out') continue;
    const k = keyOf(l.frame);
    if (k === 'stream_event/' && out.at(-1) === 'stream_event…') continue;
    out.push(k === 'stream_event/' ? 'stream_event…' : k);
  }
  return out;
}

const keyOf = (f) => [f.type, f.subtype ?? f.request?.subtype ?? f.response?.subtype ?? ''].join('/');

function readTranscript(name) {
  const lines = readFileSync(join(FIXTURES, `${name}.ndjson`), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const meta = JSON.parse(readFileSync(join(FIXTURES, `${name}.meta.json`), 'utf8'));
  return { lines, meta };
}

/** Runs one scenario; resolves with the new transcript lines, meta and a comparison. */
async function capture(name, cli, fakeModule, sharedHome) {
  const { lines: recorded, meta } = readTranscript(name);
  const home = sharedHome ?? mkdtempSync(join(tmpdir(), 'tether-capture-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'tether-capture-cwd-'));
  const fake = await fakeModule.startFakeAnthropic(fakeScenario(meta.fake_scenario));
  const env = {
    PATH: process.env.PATH,
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    HOME: home,
    ANTHROPIC_API_KEY: 'sk-test',
    ANTHROPIC_BASE_URL: fake.url,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ...meta.env_added,
  };
  const t0 = Date.now();
  const t = () => Date.now() - t0;
  const child = spawn(cli, meta.argv.slice(1), { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines = [];
  const outs = [];
  let stderr = '';
  let maxLine = 0;
  const waiters = new Set();
  const wake = () => waiters.forEach((w) => w());
  child.stdin.on('error', () => {});
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-8192)));
  createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
    maxLine = Math.max(maxLine, Buffer.byteLength(line));
    let frame;
    try {
      frame = JSON.parse(line);
    } catch {
      frame = { unparsed: line };
    }
    lines.push({ dir: 'out', t_ms: t(), frame });
    outs.push(frame);
    wake();
  });
  let exit;
  const exited = new Promise((res) =>
    child.once('close', (code, signal) => {
      lines.push({ dir: 'exit', t_ms: t(), code, signal });
      exit = { code, signal };
      res(exit);
      wake();
    }),
  );
  const until = (cond, what) =>
    new Promise((res, rej) => {
      const check = () => {
        if (cond()) return done(res);
        if (exit) return done(() => rej(new Error(`CLI exited before ${what}`)));
      };
      const timer = setTimeout(() => done(() => rej(new Error(`no ${what} within ${WAIT_MS} ms`))), WAIT_MS);
      const done = (f) => {
        clearTimeout(timer);
        waiters.delete(check);
        f();
      };
      waiters.add(check);
      check();
    });

  // Ids the CLI chose in the recording → the ones it chooses now (matched by order per kind).
  const ids = new Map();
  const seenRecorded = new Map();
  const mapIds = (recordedFrame) => {
    if (recordedFrame.type !== 'control_request') return;
    const k = keyOf(recordedFrame);
    const n = (seenRecorded.get(k) ?? 0) + 1;
    seenRecorded.set(k, n);
    const now = outs.filter((f) => keyOf(f) === k)[n - 1];
    if (!now) return;
    ids.set(recordedFrame.request_id, now.request_id);
    if (recordedFrame.request?.tool_use_id) ids.set(recordedFrame.request.tool_use_id, now.request?.tool_use_id);
  };
  const rewrite = (frame) => {
    let text = JSON.stringify(frame);
    for (const [from, to] of ids) if (from && to) text = text.split(from).join(to);
    return JSON.parse(text);
  };

  try {
    const expected = new Map();
    for (const entry of recorded) {
      if (entry.dir === 'out') {
        const k = keyOf(entry.frame);
        const n = (expected.get(k) ?? 0) + 1;
        expected.set(k, n);
        await until(() => outs.filter((f) => keyOf(f) === k).length >= n, `${k} #${n}`);
        mapIds(entry.frame);
      } else if (entry.dir === 'in') {
        const frame = entry.frame ? rewrite(entry.frame) : undefined;
        const text = frame ? JSON.stringify(frame) : entry.raw;
        lines.push(frame ? { dir: 'in', t_ms: t(), frame } : { dir: 'in', t_ms: t(), raw: entry.raw });
        child.stdin.write(`${text}\n`);
      } else if (entry.dir === 'note') {
        lines.push({ dir: 'note', t_ms: t(), note: entry.note });
        if (/closed stdin/.test(entry.note)) child.stdin.end();
        else if (/SIGTERM/.test(entry.note)) child.kill('SIGTERM');
        else if (/SIGINT/.test(entry.note)) child.kill('SIGINT');
      } else if (entry.dir === 'exit') {
        await until(() => exit !== undefined, 'exit');
      }
    }
  } finally {
    if (!exit) child.kill('SIGKILL');
    await exited;
    await fake.close();
  }

  const placeholders = [
    [cwd, '/workspace'],
    [cwd.replace(/[^A-Za-z0-9]/g, '-'), '-workspace'],
    [home, '/home/user'],
    [fake.url.replace(/^http:\/\/127\.0\.0\.1:/, ':'), ':PORT'],
  ];
  const scrub = (value) => {
    let text = JSON.stringify(value);
    for (const [from, to] of placeholders) text = text.split(from).join(to);
    return JSON.parse(text.replace(/\/tmp\/cc-socks\/\d+\.sock/g, '/tmp/cc-socks/PID.sock'));
  };
  if (!sharedHome) rmSync(home, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
  const newMeta = {
    ...meta,
    argv: ['/opt/claude/claude', ...meta.argv.slice(1)],
    exit_code: exit.code,
    stderr_tail: scrub(stderr.trim()),
    fake_requests: fake.requests.map((r) => ({
      path: r.path,
      model: r.model,
      stream: r.stream,
      n_messages: r.messageCount,
      n_tools: r.toolNames.length,
      answered_with: r.answeredWith,
    })),
    max_stdout_line_bytes: maxLine,
    captured_with: { cli: cli.replace(ROOT, '.'), at: new Date().toISOString() },
  };
  const was = shapeOf(recorded);
  const now = shapeOf(lines);
  const same = was.join() === now.join() && meta.exit_code === exit.code;
  return { lines: scrub(lines), meta: newMeta, same, was, now };
}

async function main() {
  const { values } = parseArgs({
    options: {
      cli: { type: 'string' },
      only: { type: 'string' },
      out: { type: 'string' },
      check: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const names = values.only
    ? values.only
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : SCRIPTED;
  for (const n of names) if (!existsSync(join(FIXTURES, `${n}.ndjson`))) throw new Error(`no transcript ${n} in test/fixtures/engine`);
  const cli = values.cli ?? cliPath();
  const out = values.out ? resolve(values.out) : mkdtempSync(join(tmpdir(), 'tether-capture-'));
  mkdirSync(out, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'tether-capture-work-'));
  let failed = 0;
  try {
    const fakeModule = await loadFake(work);
    // 82a–82c were captured against one HOME (82b resumes 82a's session): so they are here.
    const home82 = mkdtempSync(join(work, 'home-82-'));
    for (const name of names) {
      const t0 = Date.now();
      try {
        const r = await capture(name, cli, fakeModule, /^82[abc]_/.test(name) ? home82 : undefined);
        writeFileSync(join(out, `${name}.ndjson`), r.lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
        writeFileSync(join(out, `${name}.meta.json`), JSON.stringify(r.meta, null, 1) + '\n');
        const verdict = !values.check ? 'captured' : r.same ? 'same shape as stored' : 'DIFFERS from stored';
        if (values.check && !r.same) {
          failed++;
          process.stdout.write(`  stored: ${r.was.join(' ')}\n  now:    ${r.now.join(' ')}\n`);
        }
        process.stdout.write(`${name}: ${verdict} (${r.lines.length} lines, exit ${r.meta.exit_code}, ${Date.now() - t0} ms)\n`);
      } catch (err) {
        failed++;
        process.stdout.write(`${name}: FAILED: ${err.message}\n`);
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  process.stdout.write(`written to ${out}\n`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`capture: ${err.message}\n`);
    process.exit(2);
  },
);
