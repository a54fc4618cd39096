// Builds the web page the gateway serves at `/` (client/web → dist/web): one minified
// JavaScript bundle (esbuild; Preact, marked and DOMPurify bundled, nothing from a CDN), the
// code highlighter as a chunk of its own (loaded only when a code block shows), the stylesheet
// and index.html, all flat in dist/web. Fails when the initial load is over its gzipped budget.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { deflateSync, gzipSync } from 'node:zlib';
import { basename, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = `${root}client/web/`;
const out = `${root}dist/web/`;
/** The page's budget: everything it loads, gzipped (issue 17). */
const BUDGET_GZIP_BYTES = 250 * 1024;

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const result = await build({
  entryPoints: { app: `${src}src/main.tsx`, highlighter: `${src}src/highlighter.ts` }, // the highlighter: a dynamic import(), its own file
  outdir: out,
  chunkNames: 'chunk-[hash]',
  splitting: true,
  metafile: true,
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  logLevel: 'warning',
});
// The service worker: one classic script of its own at the root, so its scope is the whole page.
await build({
  entryPoints: { sw: `${src}sw/service-worker.ts` },
  outdir: out,
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2022'],
  legalComments: 'none',
  logLevel: 'warning',
});
for (const f of ['index.html', 'styles.css', 'manifest.webmanifest', 'icon.svg']) copyFileSync(src + f, out + f);
for (const size of [192, 512]) writeFileSync(`${out}icon-${size}.png`, iconPng(size));

/** The app icon as a PNG (what the SVG draws: a light T on a dark square), for platforms that want one. */
function iconPng(size) {
  const dark = [0x1d, 0x1d, 0x1f];
  const light = [0xf7, 0xf7, 0xf5];
  const u = size / 64; // the SVG's units
  const inT = (x, y) =>
    (y >= 16 * u && y < 24 * u && x >= 14 * u && x < 50 * u) || (x >= 28 * u && x < 36 * u && y >= 24 * u && y < 50 * u);
  const rows = [];
  for (let y = 0; y < size; y++) {
    const row = Buffer.alloc(1 + size * 3); // filter byte 0, then RGB
    for (let x = 0; x < size; x++) row.set(inT(x, y) ? light : dark, 1 + x * 3);
    rows.push(row);
  }
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function crc32(buf) {
  let c = ~0;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}
const gzipOf = (f) => gzipSync(readFileSync(out + f)).length;
// The initial load: the page, the stylesheet, app.js and the chunks app.js imports statically
// (a dynamic import(), the highlighter's, is fetched later and reported on its own).
const app = result.metafile.outputs[relative(root, `${out}app.js`)];
const staticChunks = app.imports.filter((i) => i.kind === 'import-statement').map((i) => basename(i.path));
const initial = ['index.html', 'styles.css', 'app.js', ...staticChunks];
const gz = initial.reduce((n, f) => n + gzipOf(f), 0);
const lazy = app.imports.filter((i) => i.kind === 'dynamic-import').map((i) => `${basename(i.path)} ${gzipOf(basename(i.path))} B`);
// zod is the gateway's and the library's schema checker; in the page it would triple the load
// (a value import of a core/protocol schema module pulls it in; type imports are fine).
const zodIn = Object.keys(result.metafile.inputs).filter((p) => /(^|\/)node_modules\/zod\//.test(p));
if (zodIn.length) {
  console.error(`web page: zod is bundled (${zodIn.length} files); import only types or zod-free modules of core/protocol into client/web`);
  process.exit(1);
}
if (gz > BUDGET_GZIP_BYTES) {
  console.error(`web page: ${gz} bytes gzipped, over the ${BUDGET_GZIP_BYTES}-byte budget`);
  process.exit(1);
}
console.log(`web page: initial load ${gz} B gzipped (${initial.join(', ')}); lazy: ${lazy.join(', ') || 'none'}`);
