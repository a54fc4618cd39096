// Builds the web page the gateway serves at `/` (client/web → dist/web): one minified
// JavaScript bundle (esbuild; Preact, marked and DOMPurify bundled, nothing from a CDN), the
// code highlighter as a chunk of its own (loaded only when a code block shows), the stylesheet
// and index.html, all flat in dist/web. Fails when the initial load is over its gzipped budget.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
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
copyFileSync(`${src}index.html`, `${out}index.html`);
copyFileSync(`${src}styles.css`, `${out}styles.css`);
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
