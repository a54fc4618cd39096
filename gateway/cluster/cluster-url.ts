import { TetherError } from '../../core/errors.js';

/**
 * Checks a `--cluster` value: `nats://HOST:PORT` (`tls://` for TLS), nothing else. Throws
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
  if ((url.pathname && url.pathname !== '/') || url.search || url.hash || url.username) throw bad('takes no path, query or credentials');
  return url;
}
