// Writes test/support/known-slow-files.ts from a run's times (TETHER_TEST_TIMES=FILE npm test):
// the files that took 10 s or more, slowest first. test/support/slow-first.ts starts them first.
// Usage: node scripts/known-slow-files.mjs TIMES.json
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const SLOW_MS = 10_000;
const [timesFile] = process.argv.slice(2);
if (!timesFile) {
  process.stderr.write('usage: node scripts/known-slow-files.mjs TIMES.json (written by TETHER_TEST_TIMES=TIMES.json npm test)\n');
  process.exit(2);
}
const times = JSON.parse(readFileSync(timesFile, 'utf8'));
if (!Array.isArray(times) || !times.every((t) => typeof t?.file === 'string' && typeof t?.ms === 'number'))
  throw new Error(`${timesFile} is not a times file: expected [{ file, ms }, ...] as TETHER_TEST_TIMES writes it`);
const slow = times.filter((t) => t.ms >= SLOW_MS).sort((a, b) => b.ms - a.ms);
const out = fileURLToPath(new URL('../test/support/known-slow-files.ts', import.meta.url));
writeFileSync(
  out,
  `/**
 * Test files that took ${SLOW_MS / 1000} s or more (wall) in a full run, slowest first, with their seconds:
 * test/support/slow-first.ts starts them first, so none starts last and holds up the end of the
 * run (a clean clone has no vitest cache to order by). Made by scripts/known-slow-files.mjs from
 * a run's TETHER_TEST_TIMES file; vitest.config.ts refuses a name that is not in the tree.
 */
export const KNOWN_SLOW_FILES: readonly (readonly [file: string, seconds: number])[] = [
${slow.map((t) => `  ['${t.file}', ${(t.ms / 1000).toFixed(1)}],`).join('\n')}
];
`,
);
process.stdout.write(`${out}: ${slow.length} files\n`);
