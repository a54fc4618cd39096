/**
 * `tether` runs with a V8 flag (bin/tether.ts says why). It is defined once, on the entry's
 * `#!` line; `npm start` repeats it and the bench runs our gateway and agent with it: they agree,
 * the flag is one node takes, and the `#!` line runs as the kernel runs it.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: the bench's own JavaScript, without types
import { tetherNodeFlags } from '../bench/lib/proc.mjs';
import { TETHER_BIN } from './support/cli.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

/** The source entry's `#!` line, split as `env -S` splits it. */
function shebang(): string[] {
  const first = readFileSync(`${ROOT}bin/tether.ts`, 'utf8').split('\n', 1)[0]!;
  expect(first).toMatch(/^#!\/usr\/bin\/env -S node( --\S+)+$/);
  return first.slice('#!/usr/bin/env -S '.length).split(' ');
}

describe('the node flags tether runs with', () => {
  it('are the same in the built entry, npm start and the bench', () => {
    const [node, ...flags] = shebang();
    expect(node).toBe('node');
    expect(flags).toContain('--initial-old-space-size=128');
    expect((tetherNodeFlags as (entry?: string) => string[])(TETHER_BIN)).toEqual(flags);
    const start = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(start).toContain(`node ${flags.join(' ')} dist/bin/tether.js up`);
  });

  it('run the entry as its #! line says (env -S), and node takes them', async () => {
    const [node, ...flags] = shebang();
    const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` };
    const { stdout } = await run('/usr/bin/env', ['-S', [node, ...flags].join(' '), TETHER_BIN, '--help'], { env, timeout: 15_000 });
    expect(stdout).toMatch(/^Usage: tether <command>/m);
  });
});
