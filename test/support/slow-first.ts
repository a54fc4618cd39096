import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { KNOWN_SLOW_FILES } from './known-slow-files.js';

const RANK = new Map(KNOWN_SLOW_FILES.map(([file], i) => [file, i]));

/**
 * Vitest's order (projects one after another, and with a cache, failed and slow files first),
 * except that within a project the known-slow files (test/support/known-slow-files.ts) start
 * first, slowest first: on a clean clone vitest has no times and would start by file size, and
 * a 60-s file starting last would hold the run up by a minute.
 */
export default class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const projectAt = new Map<string, number>();
    sorted.forEach((f, i) => projectAt.has(f.project.name) || projectAt.set(f.project.name, i));
    const rank = (f: TestSpecification) => RANK.get(relative(this.ctx.config.root, f.moduleId)) ?? RANK.size;
    return sorted
      .map((f, i) => ({ f, i }))
      .sort((a, b) => projectAt.get(a.f.project.name)! - projectAt.get(b.f.project.name)! || rank(a.f) - rank(b.f) || a.i - b.i)
      .map(({ f }) => f);
  }
}
