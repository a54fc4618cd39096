import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('..', import.meta.url).pathname;

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir))) {
    const path = join(dir, entry);
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...sources(path));
    else if (path.endsWith('.ts')) out.push(path);
  }
  return out;
}

function imports(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]/g), ...text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]);
}

/** Which files may import what (style.md: transports and processes live at the edges). */
const RULES: { module: RegExp; allowed: RegExp }[] = [
  { module: /^(ws|node:http|node:https)$/, allowed: /^(core\/channel\/ws\.ts|core\/link\/dial-ws\.ts|gateway\/listen-ws\.ts|gateway\/server\.ts|gateway\/listen-http.*\.ts)$/ },
  { module: /^@grpc\//, allowed: /^(core\/channel\/(grpc|proto)\.ts|core\/link\/dial-grpc\.ts|gateway\/listen-grpc\.ts|gateway\/grpc-.*\.ts)$/ },
  { module: /^(node:)?child_process$/, allowed: /^agent\/(engine-process|demo-engine.*)\.ts$/ },
  { module: /^jose$/, allowed: /^core\/auth\// },
];

describe('module layering', () => {
  const files = ['core', 'gateway', 'agent', 'client', 'bin'].flatMap(sources);

  it('keeps ws, grpc-js, child_process and jose at the edges', () => {
    const violations: string[] = [];
    for (const file of files) {
      for (const spec of imports(file)) {
        for (const rule of RULES) if (rule.module.test(spec) && !rule.allowed.test(file)) violations.push(`${file} imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('lets the three programs meet only through core (and bin, which starts them)', () => {
    const violations: string[] = [];
    for (const file of files) {
      const top = file.split('/')[0];
      if (top === 'bin') continue;
      for (const spec of imports(file)) {
        if (!spec.startsWith('.')) continue;
        const target = relative(ROOT, join(ROOT, file, '..', spec)).split('/')[0];
        if (target !== top && target !== 'core') violations.push(`${file} imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('core imports nothing from the programs', () => {
    const bad = sources('core').filter((f) => imports(f).some((s) => /\.\.\/(\.\.\/)?(gateway|agent|client|bin)\//.test(s)));
    expect(bad).toEqual([]);
  });
});
