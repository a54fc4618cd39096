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

  it('catches every import form: static, side-effect, re-export, dynamic import and require; every gateway room rule; and core/wire under the channels and the protocol', async () => {
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
      'client/web/src/page-ok.ts':
        "import { h } from 'preact';\nimport { v } from '../../../client/tool-view.js';\nexport const p = [h, v];\n",
      'client/tool-view.ts': 'export const v = 1;\n',
      'client/web/src/page-node.ts': "import { readFileSync } from 'node:fs';\nexport const f = readFileSync;\n",
      // The gateway's rooms: each imports down only, and one session's parts only through its face.
      'gateway/session/session.ts': 'export const s = 1;\n',
      'gateway/session/session-history.ts': 'export const h = 1;\n',
      'gateway/door/principal.ts': 'export const p = 1;\n',
      'gateway/policy/ok.ts': "import { p } from '../door/principal.js';\nexport const ok = p;\n",
      'gateway/audit/up.ts': "import { p } from '../door/principal.js';\nexport const a = p;\n",
      'gateway/door/up.ts': "import { s } from '../session/session.js';\nexport const d = s;\n",
      'gateway/policy/up.ts': "import { s } from '../session/session.js';\nexport const u = s;\n",
      'gateway/session/up.ts': "import { r } from '../directory/reach.js';\nexport const u = r;\n",
      'gateway/directory/reach.ts':
        "import { s } from '../session/session.js';\nimport { h } from '../session/session-history.js';\nexport const r = [s, h];\n",
      'gateway/directory/up.ts': "import { l } from '../listen/up.js';\nexport const u = l;\n",
      'gateway/listen/up.ts': "import { s } from '../session/session.js';\nexport const l = s;\n",
      'bin/ok.ts': "import { g } from '../gateway/static.js';\nimport { a } from '../agent/required.js';\nexport const both = [g, a];\n",
      // core/wire is below the channels and the protocol, which import neither each other.
      'core/errors.ts': 'export const e = 1;\n',
      'core/wire/frame.ts': "import { e } from '../errors.js';\nexport const f = e;\n",
      'core/wire/up.ts':
        "import { c } from '../channel/channel.js';\nimport { m } from '../protocol/methods.js';\nexport const u = [c, m];\n",
      'core/channel/channel.ts': "import { f } from '../wire/frame.js';\nexport const c = f;\n",
      'core/channel/across.ts': "import { m } from '../protocol/methods.js';\nexport const a = m;\n",
      'core/protocol/methods.ts': "import { f } from '../wire/frame.js';\nexport const m = f;\n",
      'core/protocol/across.ts': "import type { c } from '../channel/channel.js';\nexport type A = typeof c;\n",
      // The OpenTelemetry SDK: in one module, loaded by one dynamic import when tracing is on.
      'core/telemetry/otel-sdk.ts': "import { trace } from '@opentelemetry/api';\nexport const o = trace;\n",
      'core/telemetry/telemetry.ts': "export const start = () => import('./otel-sdk.js');\n",
      'core/telemetry/eager.ts': "import { o } from './otel-sdk.js';\nexport const e = o;\n",
      'gateway/otel.ts': "import { trace } from '@opentelemetry/api';\nexport const t = trace;\n",
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
        'web-page-is-a-browser-program: client/web/src/page-node.ts',
        'gateway-audit-imports-down: gateway/audit/up.ts',
        'gateway-door-imports-down: gateway/door/up.ts',
        'gateway-policy-imports-down: gateway/policy/up.ts',
        'gateway-session-imports-down: gateway/session/up.ts',
        'gateway-directory-imports-down: gateway/directory/up.ts',
        'gateway-listen-imports-down: gateway/listen/up.ts',
        'gateway-session-behind-its-face: gateway/directory/reach.ts',
        'core-wire-at-the-bottom: core/wire/up.ts',
        'core-wire-at-the-bottom: core/wire/up.ts',
        'core-channel-imports-no-protocol: core/channel/across.ts',
        'core-protocol-imports-no-channel: core/protocol/across.ts',
        'telemetry-sdk-loaded-only-when-on: core/telemetry/eager.ts',
        'telemetry-sdk-started-in-one-place: core/telemetry/eager.ts',
        'opentelemetry-in-core-telemetry: gateway/otel.ts',
      ].sort(),
    );
  }, 60_000);
});
