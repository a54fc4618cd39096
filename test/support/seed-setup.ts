import fc from 'fast-check';
import { beforeEach } from 'vitest';
import { replayLine } from './seed-value.js';
import { TEST_SEED } from './seed.js';

// Vitest setup file (every test file): fast-check draws from the run's seed unless a property
// names its own, and a failed test says how to replay the run's random choices.
fc.configureGlobal({ seed: TEST_SEED });

beforeEach(({ task, onTestFailed }) => {
  onTestFailed(() => {
    process.stderr.write(
      `${task.file.name} › ${task.name}: ${replayLine(TEST_SEED, `${task.file.name} -t ${JSON.stringify(task.name)}`)}\n`,
    );
  });
});
