/**
 * The layering rules of .dependency-cruiser.cjs hold for the house, and they catch every
 * import form (a scratch tree that breaks each rule once must be reported rule by rule).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = new URL('..', import.meta.url).pathname;
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

/** Runs dependency-cruiser in `cwd` over the five top folders and returns its violations. */
async function violations(cwd: string): Promise<Violation[]> {
  const folders = ['core', 'gateway', 'agent', 'client', 'bin'];
  // depcruise exits non-zero when it finds violations; the JSON is on stdout either way.
  const run = await promisify(execFile)(process.execPath, [DEPCRUISE, '--config', CONFIG, '--output-type', 'json', ...folders], {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
    timeout: 60_000,
  }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  const out = JSON.parse(run.stdout) as { summary: { violations: Violation[]; totalCruised: number } };
  expect(out.summary.totalCruised).toBeGreaterThan(0);
  return out.summary.violations;
}

describe('module layering (dependency-cruiser)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'tether-layering-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('the house has no violation', async () => {
    expect((await violations(ROOT)).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`)).toEqual([]);
  }, 60_000);

  it('catches every import form: static, side-effect, re-export, dynamic import and require', async () => {
    const files: Record<string, string> = {
      'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', allowJs: true } }),
      'core/ok.ts': 'export const ok = 1;\n',
      'core/up.ts': "import { g } from '../gateway/static.js';\nexport const up = g;\n",
      'gateway/static.ts': "import { WebSocket } from 'ws';\nexport const g = WebSocket;\n",
      'gateway/side-effect.ts': "import 'ws';\n",
      'gateway/re-export.ts': "export * from '@grpc/grpc-js';\n",
      'gateway/dynamic.ts': "export const j = () => import('jose');\n",
      'gateway/cross.ts': "import { a } from '../agent/required.js';\nexport const c = a;\n",
      'agent/required.ts': "// eslint-disable-next-line\nconst cp = require('child_process');\nexport const a = cp;\n",
      'client/http.ts': "import { request } from 'node:http';\nexport const r = request;\n",
      'core/broken.ts': "import './missing.js';\n",
      'gateway/web/src/page-ok.ts': "import { h } from 'preact';\nimport { v } from '../../../client/tool-view.js';\nexport const p = [h, v];\n",
      'client/tool-view.ts': 'export const v = 1;\n',
      'gateway/web/src/page-node.ts': "import { readFileSync } from 'node:fs';\nexport const f = readFileSync;\n",
      'bin/ok.ts': "import { g } from '../gateway/static.js';\nimport { a } from '../agent/required.js';\nexport const both = [g, a];\n",
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(scratch, dirname(path)), { recursive: true });
      writeFileSync(join(scratch, path), text);
    }
    symlinkSync(join(ROOT, 'node_modules'), join(scratch, 'node_modules')); // so ws, jose… resolve as in the house
    const found = (await violations(scratch)).map((v) => `${v.rule.name}: ${v.from}`).sort();
    expect(found).toEqual(
      [
        'core-imports-no-program: core/up.ts',
        'not-to-unresolvable: core/broken.ts',
        'ws-and-http-at-the-edges: gateway/static.ts',
        'ws-and-http-at-the-edges: gateway/side-effect.ts',
        'grpc-at-the-edges: gateway/re-export.ts',
        'jose-in-core-auth: gateway/dynamic.ts',
        'gateway-meets-others-only-through-core: gateway/cross.ts',
        'processes-at-the-edges: agent/required.ts',
        'ws-and-http-at-the-edges: client/http.ts',
        'web-page-is-a-browser-program: gateway/web/src/page-node.ts',
      ].sort(),
    );
  }, 60_000);
});
