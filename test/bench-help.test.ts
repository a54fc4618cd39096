import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const BENCH = fileURLToPath(new URL('../bench/', import.meta.url));
/** The bench's scripts a person runs (bench/*.mjs with a `#!` line), not its children and libraries. */
const SCRIPTS = readdirSync(BENCH).filter((f) => f.endsWith('.mjs') && !['echo-engine.mjs'].includes(f));

describe('the bench scripts', () => {
  it.each(SCRIPTS)('%s --help prints its usage and exits at once, starting nothing', async (script) => {
    const { stdout } = await promisify(execFile)(process.execPath, [`${BENCH}${script}`, '--help'], { timeout: 10_000 });
    expect(stdout.length).toBeGreaterThan(80);
    expect(stdout).not.toMatch(/^\s*\*/m); // the comment's own markup left out
  });
});
