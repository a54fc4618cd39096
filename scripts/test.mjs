// `npm test` after the build: the test tree's type check and the vitest suite side by side.
// The suite waits on sockets, timers and child processes much of the time, so the type check
// costs little wall time beside it; its report is printed after the suite's so the two never
// interleave. Exits non-zero if either fails. Arguments go to vitest (`npm test -- FILE`).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const bin = (path) => fileURLToPath(new URL(`../node_modules/${path}`, import.meta.url));
const tsc = bin('typescript/bin/tsc');
const vitest = bin('vitest/vitest.mjs');

/** Runs node with `args`; resolves with its exit code and, when `capture`, its output. */
function run(args, capture) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: capture ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let out = '';
    if (capture) {
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
    }
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out }));
  });
}

const typecheck = run([tsc, '-p', 'tsconfig.test.json'], true);
const suite = await run([vitest, 'run', ...process.argv.slice(2)], false);
const types = await typecheck;
if (types.code !== 0) process.stdout.write(`\nThe test tree does not type-check (tsc -p tsconfig.test.json):\n${types.out}`);
else process.stdout.write('\nThe test tree type-checks (tsc -p tsconfig.test.json).\n');
process.exit(suite.code || types.code);
