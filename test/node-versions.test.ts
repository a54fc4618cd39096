import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = new URL('..', import.meta.url).pathname;

/** What the README says about Node versions holds for the lockfile and the image. */
describe('Node versions', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'tether-npm-ci-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('a clean npm ci prints no engine warning on this Node (every locked package admits it)', async () => {
    // A dry run in a scratch folder checks the locked tree's engines without touching node_modules.
    for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, f), join(scratch, f));
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const run = await promisify(execFile)(npm, ['ci', '--dry-run', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: scratch,
      timeout: 60_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const output = run.stdout + run.stderr;
    expect(output).toMatch(/added \d+ packages/);
    expect(
      output
        .split('\n')
        .filter((l) => /EBADENGINE/.test(l))
        .join('\n'),
    ).toBe('');
  });

  it('the image is built on the current LTS, Node 24', () => {
    expect(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).toMatch(/^ARG NODE_VERSION=24$/m);
  });
});
