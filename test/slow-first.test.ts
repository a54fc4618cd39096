import { join } from 'node:path';
import type { TestSpecification, Vitest } from 'vitest/node';
import { expect, it } from 'vitest';
import { KNOWN_SLOW_FILES } from './support/known-slow-files.js';
import SlowFirst from './support/slow-first.js';

const ROOT = '/repo';

/** A vitest with no cache (a clean clone): vitest alone would order by file size. */
const cleanClone = {
  config: { root: ROOT },
  cache: { getFileTestResults: () => undefined, getFileStats: () => undefined },
} as unknown as Vitest;

function spec(file: string, project: 'isolated' | 'shared'): TestSpecification {
  return {
    moduleId: join(ROOT, file),
    project: { name: project, config: { isolate: project === 'isolated', sequence: { groupOrder: 0 } } },
  } as unknown as TestSpecification;
}

it('on a clean clone the known-slow files start first, slowest first, each project still in one piece', async () => {
  const [slowest, second] = KNOWN_SLOW_FILES.map(([f]) => f);
  const files = [
    spec('test/a-quick.test.ts', 'isolated'),
    spec(second, 'isolated'),
    spec('test/shared-quick.test.ts', 'shared'),
    spec('test/b-quick.test.ts', 'isolated'),
    spec(slowest, 'isolated'),
  ];
  const order = (await new SlowFirst(cleanClone).sort(files)).map((s) => s.moduleId.slice(ROOT.length + 1));
  expect(order).toEqual([slowest, second, 'test/a-quick.test.ts', 'test/b-quick.test.ts', 'test/shared-quick.test.ts']);
});

it('the list is slowest first', () => {
  const seconds = KNOWN_SLOW_FILES.map(([, s]) => s);
  expect(seconds).toEqual([...seconds].sort((a, b) => b - a));
});
