// `npm test`: the build, then the vitest suite, with the test tree's type check, the web page's
// type check and Biome's format and lint check (`biome ci`, about a second) beside.
// The build is `npm run build` less the web page's and its service worker's type checks (tsc -p client/web and client/web/sw, noEmit):
// nothing in the build waits for them, so they run beside the build (which keeps one core busy).
// The test tree's check reads the product as the build's declarations (tsconfig.test.json
// references tsconfig.json), so it starts once the build is done, beside the suite; its report is
// printed after the suite's so the two never interleave. Exits non-zero if any of them fails.
// Arguments go to vitest (`npm test -- FILE`).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const bin = (path) => fileURLToPath(new URL(`../node_modules/${path}`, import.meta.url));
const tsc = bin('typescript/bin/tsc');
const vitest = bin('vitest/vitest.mjs');
const biome = bin('@biomejs/biome/bin/biome');

/** Runs `command`; resolves with its exit code and, when `capture`, its output. */
function run(command, args, capture) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: capture ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let out = '';
    if (capture) {
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
    }
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out }));
  });
}

const webTypecheck = run(process.execPath, [tsc, '-p', 'client/web/tsconfig.json'], true);
const swTypecheck = run(process.execPath, [tsc, '-p', 'client/web/sw/tsconfig.json'], true);
const style = run(process.execPath, [biome, 'ci', '--colors=off', '--error-on-warnings', '.'], true);
const built = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], false);
const typecheck = built.code === 0 ? run(process.execPath, [tsc, '-p', 'tsconfig.test.json'], true) : undefined;
const build = built.code === 0 ? await run(process.execPath, [fileURLToPath(new URL('build-web.mjs', import.meta.url))], false) : built;
const suite = build.code === 0 ? await run(process.execPath, [vitest, 'run', ...process.argv.slice(2)], false) : build;
if (build.code !== 0) process.stdout.write('\nThe build failed (tsc -p tsconfig.json, then scripts/build-web.mjs): no tests were run.\n');
const webTypes = await webTypecheck;
if (webTypes.code !== 0) process.stdout.write(`\nThe web page does not type-check (tsc -p client/web/tsconfig.json):\n${webTypes.out}`);
const swTypes = await swTypecheck;
if (swTypes.code !== 0)
  process.stdout.write(`\nThe service worker does not type-check (tsc -p client/web/sw/tsconfig.json):\n${swTypes.out}`);
const types = (await typecheck) ?? { code: 1, out: 'not run: it reads the build, which failed\n' };
if (types.code !== 0) process.stdout.write(`\nThe test tree does not type-check (tsc -p tsconfig.test.json):\n${types.out}`);
else process.stdout.write('\nThe test tree type-checks (tsc -p tsconfig.test.json).\n');
const styled = await style;
if (styled.code !== 0)
  process.stdout.write(`\nThe tree is not formatted or has lint findings (biome ci; npm run format fixes the formatting):\n${styled.out}`);
else process.stdout.write('The tree is formatted and lint-clean (biome ci).\n');
process.exit(suite.code || webTypes.code || swTypes.code || types.code || styled.code);
