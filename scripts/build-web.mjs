// Builds the web page the gateway serves at `/` (gateway/web → dist/web): one minified
// JavaScript bundle (esbuild; Preact, marked and DOMPurify bundled, nothing from a CDN),
// the stylesheet and index.html. Fails when the bundle is over its gzipped budget.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = `${root}gateway/web/`;
const out = `${root}dist/web/`;
/** The page's budget: everything it loads, gzipped (issue 17). */
const BUDGET_GZIP_BYTES = 250 * 1024;

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [`${src}src/main.tsx`],
  outfile: `${out}app.js`,
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
const gz = ['index.html', 'app.js', 'styles.css'].reduce((n, f) => n + gzipSync(readFileSync(out + f)).length, 0);
if (gz > BUDGET_GZIP_BYTES) {
  console.error(`web page: ${gz} bytes gzipped, over the ${BUDGET_GZIP_BYTES}-byte budget`);
  process.exit(1);
}
