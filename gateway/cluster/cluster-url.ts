import { TetherError } from '../../core/errors.js';

/**
 * Checks a `--cluster` value: `nats://HOST:PORT` (`tls://` for TLS), with credentials
 * (`nats://USER:PASS@HOST:PORT`, `nats://TOKEN@HOST:PORT`) or without, nothing else. Throws
 * INVALID_ARGUMENT naming what is wrong. Kept apart from the NATS client so the config can
 * check the value without loading it.
 */
export function parseClusterUrl(value: string): URL {
  // The value is echoed without any user:password it carries.
  const shown = () => JSON.stringify(value.replace(/\/\/[^/@]*@/, '//…@'));
  const bad = (why: string) => new TetherError('INVALID_ARGUMENT', `${why}, got ${shown()}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad('must be a URL like nats://HOST:4222');
  }
  if (url.protocol !== 'nats:' && url.protocol !== 'tls:') throw bad('must be a nats:// (or tls://) URL');
  if (!url.hostname || !url.port) throw bad('needs a host and a port, as in nats://HOST:4222');
  if ((url.pathname && url.pathname !== '/') || url.search || url.hash) throw bad('takes no path or query');
  return url;
}

/** A `--cluster` value as it may be shown: without any user, password or token it carries. */
export function shownClusterUrl(value: string): string {
  return value.replace(/\/\/[^/@]*@/, '//');
}
