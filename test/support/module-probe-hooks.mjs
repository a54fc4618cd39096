// The loader hook of module-probe.mjs (it runs on the loader's own thread).
import { appendFileSync } from 'node:fs';

export async function load(url, context, next) {
  const file = process.env.TETHER_MODULE_PROBE_FILE;
  const match = (process.env.TETHER_MODULE_PROBE_MATCH ?? '').split(',').filter(Boolean);
  if (file && match.some((m) => url.includes(m))) appendFileSync(file, `${url}\n`);
  return next(url, context);
}
