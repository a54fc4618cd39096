/**
 * Test files that get a worker process of their own (vitest.config.ts: the `isolated` project);
 * every other file shares worker processes with others (`isolate: false`), so the gateway's,
 * zod's, gRPC's and Playwright's imports are paid once per worker instead of once per file
 * (about 1 s of a worker's CPU per file). Sharing is safe for a file that leaves nothing behind
 * for the next file in its process: no `vi.mock`; spies, `process.env` and cwd restored in its
 * teardown; every server, socket, browser context and child stopped. Files that fake the timers
 * stay here: a timer that another file's late teardown (a socket's close, a backoff) sets while
 * the clock is fake would run on their clock and show in their timer counts.
 */
export const ISOLATED_FILES: readonly (readonly [file: string, reason: string])[] = [
  ['test/acp-engine-units.test.ts', 'sets process.env.PATH for a moment'],
  ['test/acp-engines.test.ts', 'sets process.env.PATH for the whole file'],
  ['test/round-trip-timers.test.ts', "counts every timer the process arms: another file's late teardown (a backoff) would count"],
  ...[
    'agent-acks',
    'agent-away',
    'control-routing',
    'heartbeat',
    'input-acks',
    'iso-now',
    'presence-coalescing',
    'prompt-posts',
    'session-directory',
  ].map((name) => [`test/${name}.test.ts`, 'fakes the timers'] as const),
];
