#!/usr/bin/env node
/**
 * Runs Tether's real-CLI end-to-end tests against one released Claude Code CLI.
 *
 *   npm run compat -- --cli 0.3.332
 *
 * VERSION is a version of @anthropic-ai/claude-agent-sdk (or a dist-tag such as `latest`);
 * its platform package (@anthropic-ai/claude-agent-sdk-<platform>-<arch>) carries the
 * matching native CLI. The package is installed once into a cache outside the repository
 * and reused; then `npm run build`, then vitest on the real-CLI test files with
 * TETHER_TEST_CLAUDE pointing at that binary. Prints a summary and records one row per
 * SDK version in docs/compatibility.md (the "Notes" cell of an existing row is kept).
 *
 * Exit codes: 0 every test passed; 1 a test failed or the run timed out; 2 bad arguments or
 * a failed build; 3 the version could not be resolved or installed (unknown version, no
 * network, no binary for this platform).
 */
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SDK = '@anthropic-ai/claude-agent-sdk';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DOC = join(ROOT, 'docs', 'compatibility.md');
/** The tests that spawn the real CLI (test/fidelity.test.ts replays recordings; not here). */
const REAL_CLI_TESTS = [
  'test/fake-anthropic.test.ts',
  'test/e2e-permission.test.ts',
  'test/team-session.test.ts',
  'test/sdk-drop-in.test.ts',
];
const DEFAULT_TIMEOUT_MIN = 20;
const INSTALL_TIMEOUT_MS = 20 * 60_000;
const REGISTRY_TIMEOUT_MS = 60_000;
const BUILD_TIMEOUT_MS = 5 * 60_000;
const VERSION_TIMEOUT_MS = 30_000;
const KILL_GRACE_MS = 5_000;
const MARKER = 'tether-compat.json';
const ROWS_START = '<!-- compat:results:start -->';
const ROWS_END = '<!-- compat:results:end -->';
const HEADER = ['SDK', 'CLI `--version`', 'Passed / failed / skipped', 'Run time', 'Checked', 'Failing tests', 'Notes'];

const HELP = `Usage: npm run compat -- --cli VERSION [options]

Runs the real-CLI end-to-end tests against the Claude Code CLI shipped with
${SDK}@VERSION and records the result in docs/compatibility.md.

Options:
  --cli VERSION     SDK version or dist-tag to test (required), e.g. 0.3.332, latest
  --cache DIR       install cache (default: $TETHER_COMPAT_CACHE, else
                    $XDG_CACHE_HOME/tether-compat, else ~/.cache/tether-compat);
                    one folder per version, reused when present; must be outside the repo
  --refresh         reinstall even if the version is cached
  --timeout MIN     overall limit for the test run in minutes (default ${DEFAULT_TIMEOUT_MIN})
  --files A,B       test files to run instead of the real-CLI set:
                    ${REAL_CLI_TESTS.join(', ')}
  --no-doc          do not touch docs/compatibility.md
  --no-build        skip \`npm run build\` (dist/ must already be fresh)
  -h, --help        this text

Exit codes: 0 all passed, 1 tests failed or timed out, 2 bad arguments or build failed,
3 version unknown / registry unreachable / install failed.
`;

class CompatError extends Error {
  constructor(message, exitCode) {
    super(message);
    this.exitCode = exitCode;
  }
}

function parseArgs(argv) {
  const o = { cache: defaultCacheRoot(), refresh: false, timeoutMin: DEFAULT_TIMEOUT_MIN, files: REAL_CLI_TESTS, doc: true, build: true };
  const value = (i, name) => {
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new CompatError(`${name} needs a value (see --help)`, 2);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const [arg, inline] =
      argv[i].startsWith('--') && argv[i].includes('=')
        ? [argv[i].slice(0, argv[i].indexOf('=')), argv[i].slice(argv[i].indexOf('=') + 1)]
        : [argv[i], undefined];
    const take = () => (inline !== undefined ? inline : value(i++, arg));
    switch (arg) {
      case '-h':
      case '--help':
        o.help = true;
        break;
      case '--cli':
        o.cli = take();
        break;
      case '--cache':
        o.cache = resolve(take());
        break;
      case '--refresh':
        o.refresh = true;
        break;
      case '--timeout':
        o.timeoutMin = Number(take());
        break;
      case '--files':
        o.files = take().split(',').filter(Boolean);
        break;
      case '--no-doc':
        o.doc = false;
        break;
      case '--no-build':
        o.build = false;
        break;
      default:
        throw new CompatError(`unknown argument "${argv[i]}" (see --help)`, 2);
    }
  }
  if (o.help) return o;
  if (!o.cli) throw new CompatError('--cli VERSION is required (see --help)', 2);
  if (!/^[\w.+-]+$/.test(o.cli)) throw new CompatError(`"${o.cli}" is not a version or dist-tag`, 2);
  if (!(o.timeoutMin > 0)) throw new CompatError('--timeout must be a positive number of minutes', 2);
  if (!relative(ROOT, o.cache).startsWith('..')) throw new CompatError(`the cache ${o.cache} must be outside the repository ${ROOT}`, 2);
  for (const f of o.files) if (!existsSync(join(ROOT, f))) throw new CompatError(`test file ${f} does not exist`, 2);
  return o;
}

function defaultCacheRoot() {
  if (process.env.TETHER_COMPAT_CACHE) return resolve(process.env.TETHER_COMPAT_CACHE);
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'tether-compat');
}

/**
 * Runs a command to completion, bounded by `timeoutMs` (SIGTERM to its process group, then
 * SIGKILL). Output is collected; `echo` also copies it to this process's stdout/stderr.
 */
function run(command, args, { cwd = ROOT, env = process.env, timeoutMs, echo = false, log, onSpawn } = {}) {
  return new Promise((resolvePromise) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    onSpawn?.(child);
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const onData = (which) => (chunk) => {
      const s = chunk.toString('utf8');
      if (which === 'out') stdout += s;
      else stderr += s;
      if (echo) (which === 'out' ? process.stdout : process.stderr).write(s);
      log?.write(s);
    };
    child.stdout.on('data', onData('out'));
    child.stderr.on('data', onData('err'));
    const killGroup = (signal) => {
      try {
        process.kill(-child.pid, signal);
      } catch {
        /* already gone */
      }
    };
    activeChildren.add(killGroup);
    let killTimer;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup('SIGTERM');
      killTimer = setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS);
    }, timeoutMs);
    child.on('error', (err) => {
      stderr += String(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      activeChildren.delete(killGroup);
      killGroup('SIGKILL'); // stragglers of the group (e.g. CLIs a test left behind)
      resolvePromise({ code, signal, stdout, stderr, timedOut });
    });
  });
}

const activeChildren = new Set();
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const kill of activeChildren) kill('SIGKILL');
    process.exit(130);
  });
}

const NETWORK_ERRORS = /E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|NETUNREACH|HOSTUNREACH)|ETIMEDOUT|network|socket hang up/i;

function registryProblem(what, r) {
  const text = `${r.stderr}\n${r.stdout}`;
  if (r.timedOut) return new CompatError(`${what}: the npm registry did not answer within the time limit (network down?)`, 3);
  if (/E404|No match found|notarget|ETARGET/i.test(text)) return null; // the caller words "unknown version"
  if (NETWORK_ERRORS.test(text)) {
    const code = text.match(/npm error code (\S+)/)?.[1] ?? 'network error';
    const reason = text.match(/request to (\S+) failed, reason: ([^\n"]+)/);
    return new CompatError(`${what}: the npm registry is unreachable (${code}${reason ? `: ${reason[1]}: ${reason[2]}` : ''})`, 3);
  }
  return new CompatError(`${what} failed (exit ${r.code}): ${tail(text, 600)}`, 3);
}

/** The exact version `spec` names, asking the registry (a cached exact version needs no network). */
async function resolveVersion(spec, cacheRoot) {
  if (/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(spec) && isInstalled(join(cacheRoot, spec))) return spec;
  const r = await run(
    'npm',
    ['view', `${SDK}@${spec}`, 'version', '--json', '--fetch-retries=1', '--fetch-retry-mintimeout=2000', '--fetch-retry-maxtimeout=5000'],
    { timeoutMs: REGISTRY_TIMEOUT_MS },
  );
  const unknown = new CompatError(
    `${SDK}@${spec} is not a published version or dist-tag (list them with: npm view ${SDK} versions --json)`,
    3,
  );
  if (r.code !== 0 || r.timedOut) throw registryProblem(`looking up ${SDK}@${spec}`, r) ?? unknown;
  const out = r.stdout.trim();
  if (!out) throw unknown;
  const parsed = JSON.parse(out);
  const versions = Array.isArray(parsed) ? parsed : [parsed];
  return versions[versions.length - 1]; // a range matches several: take the newest
}

function isInstalled(dir) {
  return existsSync(join(dir, MARKER)) && findBinary(dir) !== undefined;
}

/** The native CLI inside an install folder: the glibc platform package first, then musl. */
function findBinary(dir) {
  const base = `${SDK}-${process.platform}-${process.arch}`;
  const names = process.platform === 'linux' ? [base, `${base}-musl`] : [base];
  const exe = process.platform === 'win32' ? 'claude.exe' : 'claude';
  return names.map((n) => join(dir, 'node_modules', n, exe)).find((p) => existsSync(p));
}

/** Installs SDK@version into cacheRoot/version (atomically: a partial install is never reused). */
async function ensureInstalled(version, cacheRoot, refresh) {
  const dir = join(cacheRoot, version);
  if (!refresh && isInstalled(dir)) {
    console.log(`compat: using cached ${SDK}@${version} in ${dir}`);
    return { dir, binary: findBinary(dir), installMs: 0 };
  }
  mkdirSync(cacheRoot, { recursive: true });
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  writeFileSync(join(partial, 'package.json'), `${JSON.stringify({ name: 'tether-compat-cache', private: true }, null, 2)}\n`);
  console.log(`compat: installing ${SDK}@${version} into ${dir} (a few hundred MB) ...`);
  const started = Date.now();
  const r = await run(
    'npm',
    ['install', '--prefix', partial, '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error', `${SDK}@${version}`],
    { cwd: partial, timeoutMs: INSTALL_TIMEOUT_MS },
  );
  const installMs = Date.now() - started;
  if (r.code !== 0 || r.timedOut) {
    rmSync(partial, { recursive: true, force: true });
    throw registryProblem(`npm install ${SDK}@${version}`, r) ?? new CompatError(`${SDK}@${version} is not published`, 3);
  }
  const binary = findBinary(partial);
  if (!binary) {
    rmSync(partial, { recursive: true, force: true });
    throw new CompatError(
      `${SDK}@${version} installed, but it has no native CLI for ${process.platform}-${process.arch} (expected ${SDK}-${process.platform}-${process.arch}/claude)`,
      3,
    );
  }
  writeFileSync(join(partial, MARKER), `${JSON.stringify({ version, installed_at: new Date().toISOString() }, null, 2)}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
  console.log(`compat: installed in ${formatMs(installMs)}`);
  return { dir, binary: findBinary(dir), installMs };
}

async function cliVersion(binary) {
  const home = mkdtempSync(join(tmpdir(), 'tether-compat-home-'));
  try {
    const r = await run(binary, ['--version'], {
      env: { PATH: process.env.PATH ?? '', HOME: home, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' },
      cwd: home,
      timeoutMs: VERSION_TIMEOUT_MS,
    });
    if (r.code !== 0) throw new CompatError(`${binary} --version failed (exit ${r.code ?? r.signal}): ${tail(r.stderr, 400)}`, 3);
    return firstLine(r.stdout.trim());
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

async function build() {
  console.log('compat: npm run build --silent');
  const r = await run('npm', ['run', 'build', '--silent'], { timeoutMs: BUILD_TIMEOUT_MS });
  if (r.code !== 0) throw new CompatError(`the build failed${r.timedOut ? ' (timed out)' : ''}:\n${tail(r.stdout + r.stderr, 3_000)}`, 2);
}

/** vitest on `files` against `binary`; returns counts, failing test names and the wall time. */
async function runTests(binary, files, timeoutMin, logPath) {
  const work = mkdtempSync(join(tmpdir(), 'tether-compat-'));
  const jsonPath = join(work, 'vitest.json');
  const log = createLog(logPath);
  const args = [
    join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'),
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${jsonPath}`,
    ...files,
  ];
  console.log(`compat: vitest run ${files.join(' ')}  (TETHER_TEST_CLAUDE=${binary}, limit ${timeoutMin} min, log ${logPath})`);
  const started = Date.now();
  let sinceTicks;
  const r = await run(process.execPath, args, {
    env: { ...process.env, TETHER_TEST_CLAUDE: binary, NO_COLOR: '1', FORCE_COLOR: undefined },
    timeoutMs: timeoutMin * 60_000,
    echo: true,
    log,
    onSpawn: (child) => {
      sinceTicks = processStartTicks(child.pid);
    },
  });
  const wallMs = Date.now() - started;
  log.end();
  if (sinceTicks !== undefined) await reapStrays(binary, sinceTicks);
  let report;
  try {
    report = JSON.parse(readFileSync(jsonPath, 'utf8'));
  } catch {
    report = undefined;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return summarize(report, { ...r, wallMs });
}

/** Start time of a process in clock ticks since boot (/proc/PID/stat field 22), or undefined off Linux. */
function processStartTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return undefined;
  }
}

/**
 * Stops CLI processes of `binary` that this run started and left behind. The agent starts each
 * engine in its own process group, so killing vitest's group (after a timeout) can orphan them;
 * they are recognised by their executable and by starting after vitest did.
 */
async function reapStrays(binary, sinceTicks) {
  const target = realpathSync(binary);
  const find = () =>
    readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .filter((pid) => {
        try {
          return readlinkSync(`/proc/${pid}/exe`) === target && (processStartTicks(pid) ?? -1) >= sinceTicks;
        } catch {
          return false; // gone, or not ours to read
        }
      });
  let strays;
  try {
    strays = find();
  } catch {
    return; // no /proc
  }
  if (strays.length === 0) return;
  console.log(`compat: stopping ${strays.length} CLI process(es) this run left behind: ${strays.join(' ')}`);
  const signal = (sig) =>
    strays.forEach((pid) => {
      try {
        process.kill(pid, sig);
      } catch {
        /* already gone */
      }
    });
  signal('SIGTERM');
  const deadline = Date.now() + KILL_GRACE_MS;
  while (Date.now() < deadline && find().length > 0) await new Promise((r) => setTimeout(r, 200));
  strays = find();
  signal('SIGKILL');
}

function createLog(path) {
  mkdirSync(dirname(path), { recursive: true });
  let text = '';
  return {
    write: (s) => {
      text += s;
    },
    end: () => writeFileSync(path, text),
  };
}

/** Counts and failing names from vitest's JSON report (file-level errors count as failures). */
function summarize(report, r) {
  const out = { passed: 0, failed: 0, skipped: 0, failures: [], timedOut: r.timedOut, wallMs: r.wallMs, exitCode: r.code };
  if (!report) {
    out.failures.push({
      name: r.timedOut ? 'the run timed out before vitest wrote its report' : `vitest wrote no report (exit ${r.code ?? r.signal})`,
      message: tail(r.stderr, 400),
    });
    out.failed = 1;
    return out;
  }
  for (const file of report.testResults ?? []) {
    const rel = relative(ROOT, file.name ?? '');
    for (const t of file.assertionResults ?? []) {
      if (t.status === 'passed') out.passed++;
      else if (t.status === 'failed') {
        out.failed++;
        out.failures.push({ name: `${rel} > ${t.fullName ?? t.title}`, message: firstLine(stripAnsi(t.failureMessages?.[0] ?? '')) });
      } else out.skipped++;
    }
    if (file.status === 'failed' && !(file.assertionResults ?? []).some((t) => t.status === 'failed')) {
      out.failed++;
      out.failures.push({ name: `${rel} (file)`, message: firstLine(stripAnsi(file.message ?? '')) });
    }
  }
  if (r.timedOut) out.failures.push({ name: 'the run hit the overall time limit', message: '' });
  return out;
}

/** The failing tests for the doc's table cell, counted per file (names are in the summary and the log). */
function docFailures(failures) {
  if (failures.length === 0) return '—';
  const perFile = new Map();
  for (const f of failures) {
    const file = f.name
      .split(' > ')[0]
      .replace(/^test\//, '')
      .replace(/\.test\.ts( \(file\))?$/, '');
    perFile.set(file, (perFile.get(file) ?? 0) + 1);
  }
  return [...perFile].map(([file, n]) => `${file} ×${n}`).join(', ');
}

/** Inserts or replaces the row for `version` between the result markers of the doc. */
function updateDoc(row) {
  const doc = existsSync(DOC) ? readFileSync(DOC, 'utf8') : `# Compatibility with Claude Code CLI versions\n\n${ROWS_START}\n${ROWS_END}\n`;
  const start = doc.indexOf(ROWS_START);
  const end = doc.indexOf(ROWS_END);
  if (start < 0 || end < start)
    throw new CompatError(`${DOC} has no ${ROWS_START} … ${ROWS_END} block; add one where the table belongs`, 2);
  const rows = new Map();
  for (const line of doc.slice(start + ROWS_START.length, end).split('\n')) {
    const cells = splitRow(line);
    if (cells && /^\d/.test(cells[0])) rows.set(cells[0], cells);
  }
  const previous = rows.get(row[0]);
  if (previous?.[HEADER.length - 1]) row[HEADER.length - 1] = previous[HEADER.length - 1];
  rows.set(row[0], row);
  const sorted = [...rows.values()].sort((a, b) => compareVersions(b[0], a[0]));
  const table = [
    `| ${HEADER.join(' | ')} |`,
    `|${HEADER.map(() => '---').join('|')}|`,
    ...sorted.map((cells) => `| ${cells.join(' | ')} |`),
  ].join('\n');
  const next = `${doc.slice(0, start + ROWS_START.length)}\n${table}\n${doc.slice(end)}`;
  const tmp = `${DOC}.tmp-${process.pid}`;
  writeFileSync(tmp, next);
  renameSync(tmp, DOC);
}

/** Cells of a markdown table row (`\|` stays inside a cell), or undefined for other lines. */
function splitRow(line) {
  const t = line.trim();
  if (!t.startsWith('|') || !t.endsWith('|')) return undefined;
  return t
    .slice(1, -1)
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());
}

const cell = (s) => String(s).replace(/\r?\n/g, ' ').replace(/\|/g, '\\|');

function compareVersions(a, b) {
  const pa = a.split(/[.-]/).map((x) => (/^\d+$/.test(x) ? Number(x) : x));
  const pb = b.split(/[.-]/).map((x) => (/^\d+$/.test(x) ? Number(x) : x));
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    if (pa[i] === pb[i]) continue;
    if (pa[i] === undefined) return -1;
    if (pb[i] === undefined) return 1;
    return pa[i] < pb[i] ? -1 : 1;
  }
  return 0;
}

const firstLine = (s) =>
  String(s)
    .split('\n')
    .find((l) => l.trim())
    ?.trim()
    .slice(0, 300) ?? '';
const tail = (s, n) => String(s).trim().slice(-n);
// eslint-disable-next-line no-control-regex
const stripAnsi = (s) => String(s).replace(/\u001b\[[0-9;]*m/g, '');

function formatMs(ms) {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const version = await resolveVersion(o.cli, o.cache);
  if (version !== o.cli) console.log(`compat: ${o.cli} is ${SDK}@${version}`);
  const { dir, binary, installMs } = await ensureInstalled(version, o.cache, o.refresh);
  const cli = await cliVersion(binary);
  console.log(`compat: CLI ${binary} reports "${cli}"`);
  if (o.build) await build();
  const res = await runTests(binary, o.files, o.timeoutMin, join(dir, 'last-run.log'));

  const total = res.passed + res.failed + res.skipped;
  console.log('\n=== compat summary ===');
  console.log(`SDK:        ${SDK}@${version}`);
  console.log(`CLI:        ${cli}  (${binary})`);
  if (installMs) console.log(`install:    ${formatMs(installMs)}`);
  console.log(
    `tests:      ${res.passed} passed, ${res.failed} failed, ${res.skipped} skipped (${total} total) in ${formatMs(res.wallMs)}${res.timedOut ? ' — TIMED OUT' : ''}`,
  );
  for (const f of res.failures) console.log(`  FAIL ${f.name}${f.message ? `\n       ${f.message}` : ''}`);
  console.log(`log:        ${join(dir, 'last-run.log')}`);

  if (o.doc) {
    const failing = docFailures(res.failures);
    const counts = `${res.passed} / ${res.failed} / ${res.skipped}${res.timedOut ? ' (timed out)' : ''}`;
    const partial = o.files === REAL_CLI_TESTS ? '' : ` (only ${o.files.join(', ')})`;
    updateDoc([
      version,
      cell(cli.replace(/\s*\(Claude Code\)\s*$/, '')),
      counts + partial,
      formatMs(res.wallMs),
      new Date().toISOString().slice(0, 10),
      cell(failing),
      '',
    ]);
    console.log(`doc:        ${relative(ROOT, DOC)} updated`);
  }
  return res.failed === 0 && !res.timedOut ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`compat: ${err instanceof CompatError ? err.message : (err?.stack ?? err)}`);
    process.exit(err instanceof CompatError ? err.exitCode : 2);
  },
);
