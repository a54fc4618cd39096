import { firstTimeThisRun } from './once-per-run.js';
import { hasTool, missingToolLine, TOOL_NAMES } from './tools.js';

/**
 * Vitest global setup: one line per missing program (test/support/tools.ts) instead of a wall of
 * failures; under CI (CI=true) a missing one fails the run, as a silent skip would hide it.
 */
export default function setup(): void {
  const missing = TOOL_NAMES.filter((name) => !hasTool(name));
  if (!missing.length || !firstTimeThisRun('tools')) return;
  if (process.env.CI === 'true' || process.env.CI === '1') {
    throw new Error(
      `CI must run every test, but ${missing.map((m) => `${m} is missing (${missingToolLine(m).split('; ')[1]})`).join('; ')}`,
    );
  }
  for (const name of missing) process.stdout.write(`${missingToolLine(name)}\n`);
}
