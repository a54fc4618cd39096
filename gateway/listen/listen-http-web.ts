import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where `npm run build` puts the web page: dist/web, beside this module's dist/gateway (or,
 * when this module runs from its source, as in tests, dist/web of the repository).
 */
export const DEFAULT_WEB_ROOT =
  [new URL('../../web/', import.meta.url), new URL('../../dist/web/', import.meta.url)]
    .map((u) => fileURLToPath(u))
    .find((dir) => existsSync(join(dir, 'index.html'))) ?? fileURLToPath(new URL('../../web/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
};

/**
 * The page may load only its own files, talk only to its own origin (fetch and WebSocket),
 * show images it made itself (pasted images are data: and blob: URLs), and never be framed.
 */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** One file of the page, read once at start. */
interface WebFile {
  body: Buffer;
  type: string;
}

/** The web page's files, served from memory. */
export interface WebAssets {
  /** URL path → file; `/` is index.html. */
  files: Map<string, WebFile>;
  root: string;
}

/**
 * Reads the built page from `root` (flat: index.html and its assets, no sub-folders): small
 * files, read once so a request never touches the disk. Undefined when the page is not built.
 */
export function loadWebAssets(root: string = DEFAULT_WEB_ROOT): WebAssets | undefined {
  if (!existsSync(join(root, 'index.html'))) return undefined;
  const files = new Map<string, WebFile>();
  for (const name of readdirSync(root)) {
    const path = join(root, name);
    if (!statSync(path).isFile() || name.endsWith('.map')) continue;
    files.set(`/${name}`, { body: readFileSync(path), type: TYPES[extname(name)] ?? 'application/octet-stream' });
  }
  files.set('/', files.get('/index.html')!);
  return { files, root };
}

/**
 * Serves the web page on GET/HEAD of `/` and its asset paths; returns false for any other
 * path (the API endpoints, the WebSocket path). Every answer carries a strict
 * Content-Security-Policy, nosniff and no-referrer; index.html is never cached (it names the
 * assets), the assets for an hour. Without a built page, `/` answers 404 saying how to build it.
 */
export function handleWebRequest(assets: WebAssets | undefined, req: IncomingMessage, res: ServerResponse): boolean {
  const path = (req.url ?? '/').split('?')[0];
  const file = assets?.files.get(path);
  if (!file) {
    if (path !== '/') return false;
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('the web client is not built: run npm run build\n');
    return true;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('use GET');
    return true;
  }
  res.writeHead(200, {
    'content-type': file.type,
    'content-length': file.body.length,
    'cache-control': path === '/' || path === '/index.html' || path === '/sw.js' ? 'no-store' : 'public, max-age=3600',
    'content-security-policy': CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
  });
  res.end(req.method === 'HEAD' ? undefined : file.body);
  return true;
}
