import { writeFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

/** How many files each list in the summary names. */
const SHOWN = 10;

/** One file's cost: wall time in its worker (import + tests + hooks) and CPU (test/support/file-cpu.ts; absent without /proc). */
export interface FileTime {
  file: string;
  ms: number;
  cpuMs?: number;
}

/**
 * Prints the ten slowest test files (wall time) and the ten costliest (CPU) at the end of a
 * run, so whoever wants the suite faster knows where to look first. TETHER_TEST_TIMES=FILE also
 * writes every file's times there as JSON (slowest first): test/support/known-slow-files.ts is
 * made from it.
 */
export default class SlowestFiles implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const times: FileTime[] = modules.map((m) => {
      const d = m.diagnostic();
      return { file: m.relativeModuleId, ms: Math.round(d.collectDuration + d.duration), cpuMs: m.meta().cpuMs };
    });
    times.sort((a, b) => b.ms - a.ms);
    if (process.env.TETHER_TEST_TIMES) writeFileSync(process.env.TETHER_TEST_TIMES, JSON.stringify(times, null, 1));
    const line = (t: FileTime) =>
      `  ${(t.ms / 1000).toFixed(1).padStart(6)} s  ${t.cpuMs === undefined ? '     ?' : (t.cpuMs / 1000).toFixed(1).padStart(6)} CPU-s  ${t.file}`;
    const out = [`\nSlowest ${Math.min(SHOWN, times.length)} test files (wall):`, ...times.slice(0, SHOWN).map(line)];
    const measured = times.filter((t) => t.cpuMs !== undefined);
    if (measured.length) {
      const total = measured.reduce((sum, t) => sum + t.cpuMs!, 0);
      measured.sort((a, b) => b.cpuMs! - a.cpuMs!);
      out.push(`Costliest ${Math.min(SHOWN, measured.length)} test files (CPU; ${(total / 1000).toFixed(0)} CPU-s in all files):`);
      out.push(...measured.slice(0, SHOWN).map(line));
    }
    process.stdout.write(`${out.join('\n')}\n`);
  }
}
