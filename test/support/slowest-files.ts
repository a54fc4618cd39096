import { writeFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

/** How many files the summary names. */
const SHOWN = 10;

/**
 * Prints the slowest test files at the end of a run (import + tests + hooks, wall time in
 * that file's worker), so whoever wants the suite faster knows where to look first.
 * TETHER_TEST_TIMES=FILE also writes every file's time there as JSON (slowest first).
 */
export default class SlowestFiles implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const times = modules.map((m) => {
      const d = m.diagnostic();
      return { file: m.relativeModuleId, ms: d.collectDuration + d.duration };
    });
    times.sort((a, b) => b.ms - a.ms);
    if (process.env.TETHER_TEST_TIMES) writeFileSync(process.env.TETHER_TEST_TIMES, JSON.stringify(times, null, 1));
    const lines = times.slice(0, SHOWN).map((t) => `  ${(t.ms / 1000).toFixed(1).padStart(6)} s  ${t.file}`);
    process.stdout.write(`\nSlowest ${Math.min(SHOWN, times.length)} test files:\n${lines.join('\n')}\n`);
  }
}
