import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hasTool } from './support/tools.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VITEST = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
const GONE = '/nonexistent/nats-server';

/** Runs vitest on the tools fixture (a file needing nats-server) with `env`; its exit code and output. */
function runFixture(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [VITEST, 'run', '--config', 'test/fixtures/tools/vitest.config.ts'],
      { cwd: ROOT, env: { ...process.env, CI: '', ...env }, timeout: 60_000 },
      (_err, stdout, stderr) => resolve({ code: child.exitCode, output: stdout + stderr }),
    );
  });
}

/** Without chromium or nats-server a developer gets one line and skipped files; CI gets a failure. */
describe('tests that need a program the machine lacks', () => {
  it('on a developer machine: one line saying what to install, the file skipped, the run green', async () => {
    const r = await runFixture({ TETHER_TEST_NATS_SERVER: GONE });
    expect(r.code, r.output).toBe(0);
    const lines = r.output.split('\n').filter((l) => l.includes('nats-server not found'));
    expect(lines).toEqual([
      'nats-server not found: the tests that need it are skipped; install nats-server: apt-get install nats-server (or set TETHER_TEST_NATS_SERVER)',
    ]);
    expect(r.output).toMatch(/1 skipped/);
  });

  it('under CI (CI=true): the run fails, naming what is missing', async () => {
    const r = await runFixture({ TETHER_TEST_NATS_SERVER: GONE, CI: 'true' });
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('CI must run every test, but nats-server is missing (install nats-server: apt-get install nats-server');
  });

  it.skipIf(!hasTool('nats-server'))('with the program there, the file runs', async () => {
    const r = await runFixture({});
    expect(r.code, r.output).toBe(0);
    expect(r.output).toMatch(/1 passed/);
    expect(r.output).not.toContain('not found');
  });
});
