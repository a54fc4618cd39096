/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and says where the time went: the top functions
 * by self time, our own functions (dist/ → source .ts) by inclusive time, and self time by
 * file. Percentages are of the busy (non-idle) time.
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';

const maps = new Map();
/** The source .ts line of a dist/ position, through the compiler's source map. */
function sourceLine(path, line0, col0) {
  if (!maps.has(path)) {
    let map;
    try {
      if (existsSync(`${path}.map`)) map = new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')));
    } catch {
      map = undefined;
    }
    maps.set(path, map);
  }
  const e = maps.get(path)?.findEntry(line0, col0);
  return e && e.originalLine !== undefined ? e.originalLine + 1 : undefined;
}

function shortUrl(url, root) {
  if (!url) return '';
  let u = url.replace(/^file:\/\//, '');
  if (u.startsWith(`${root}/dist/`)) return u.slice(root.length + 6).replace(/\.js$/, '.ts');
  if (u.startsWith(`${root}/`)) u = u.slice(root.length + 1);
  return u.replace(/^node_modules\//, '');
}

export function analyzeProfile(file, root) {
  const p = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const keyOf = (n) => {
    const f = n.callFrame;
    const url = shortUrl(f.url, root);
    const ours = f.url.includes(`${root}/dist/`);
    const line = ours ? (sourceLine(f.url.replace(/^file:\/\//, ''), f.lineNumber, f.columnNumber) ?? f.lineNumber + 1) : f.lineNumber + 1;
    return { key: `${f.functionName || '(anonymous)'} ${url ? `${url}:${line}` : ''}`.trim(), url, ours };
  };
  const keys = new Map(p.nodes.map((n) => [n.id, keyOf(n)]));
  const self = new Map();
  const incl = new Map();
  const files = new Map();
  let total = 0;
  let idle = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    const id = p.samples[i];
    const n = byId.get(id);
    if (!n) continue;
    total += dt;
    if (n.callFrame.functionName === '(idle)') {
      idle += dt;
      continue;
    }
    const k = keys.get(id);
    self.set(k.key, (self.get(k.key) ?? 0) + dt);
    const fileKey = k.url || n.callFrame.functionName;
    files.set(fileKey, (files.get(fileKey) ?? 0) + dt);
    const seen = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const kk = keys.get(cur);
      if (!kk.ours || seen.has(kk.key)) continue;
      seen.add(kk.key);
      incl.set(kk.key, (incl.get(kk.key) ?? 0) + dt);
    }
  }
  const busy = total - idle;
  const top = (m, n) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, us]) => ({ name, ms: +(us / 1000).toFixed(1), pct: +((100 * us) / busy).toFixed(1) }));
  return {
    file,
    busyMs: +(busy / 1000).toFixed(0),
    idleMs: +(idle / 1000).toFixed(0),
    topSelf: top(self, 25),
    oursInclusive: top(incl, 25),
    byFile: top(files, 20),
  };
}
