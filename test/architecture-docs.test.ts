/**
 * docs/architecture.md names real files: every path it writes in backticks (a file, a folder
 * ending in `/`, `{a,b}` alternatives or a `*` pattern) exists, and every bare file name it
 * gives (`session-history.ts`) is some file's name in the house.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('..', import.meta.url).pathname;
const doc = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
const TOP = ['bin', 'core', 'gateway', 'agent', 'client', 'proto', 'test', 'docs', 'scripts'];

/** Every file and folder under the top folders, as paths from the root (folders end in `/`). */
function house(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) {
        out.push(`${path}/`);
        walk(path);
      } else out.push(path);
    }
  };
  for (const top of TOP) {
    out.push(`${top}/`);
    walk(top);
  }
  return out;
}

/** `core/channel/{grpc,proto}.ts` → both paths; `*` matches within one path segment. */
function patternsOf(path: string): RegExp[] {
  const m = /\{([^}]+)\}/.exec(path);
  if (m) return m[1].split(',').flatMap((alt) => patternsOf(path.replace(m[0], alt)));
  const escaped = path.replace(/[.+?^$()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*');
  return [new RegExp(`^${escaped}$`)];
}

describe('docs/architecture.md', () => {
  const files = house();
  const quoted = [...doc.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]);
  const isPath = (q: string): boolean => TOP.some((t) => q.startsWith(`${t}/`));
  const isBareFile = (q: string): boolean => !q.includes('/') && /^[\w-]+\.(ts|tsx|mjs|md|proto)$/.test(q);

  it('names paths that exist', () => {
    const paths = quoted.filter(isPath);
    expect(paths.length).toBeGreaterThan(20);
    expect(paths.filter((p) => !patternsOf(p).some((re) => files.some((f) => re.test(f))))).toEqual([]);
  });

  it('names bare files that exist somewhere in the house', () => {
    const names = new Set(files.map((f) => f.split('/').pop()));
    const bare = quoted.filter(isBareFile);
    expect(bare.length).toBeGreaterThan(10);
    expect(bare.filter((b) => !names.has(b))).toEqual([]);
  });
});
