import { createRemoteJWKSet, customFetch, errors, type FetchImplementation, type JWSHeaderParameters, type FlattenedJWSInput } from 'jose';
import type { KeyObject } from 'node:crypto';
import { TetherError } from '../errors.js';
import { authError } from './auth-error.js';

/** Limits of a remote key set (threats.md part 3). */
export interface JwksLimits {
  /** Fetch timeout (default 5 s). */
  timeoutMs: number;
  /** After a fetch, an unknown kid waits this long before it may trigger another (default 30 s). */
  cooldownMs: number;
  /** Fetched keys are used this long, even while the endpoint is down (default 10 min). */
  cacheMaxAgeMs: number;
  /** Largest response body read (default 64 KiB); a bigger one fails the fetch. */
  maxBytes: number;
}

/** Defaults of {@link JwksLimits}. */
export const JWKS_DEFAULTS: JwksLimits = { timeoutMs: 5_000, cooldownMs: 30_000, cacheMaxAgeMs: 10 * 60_000, maxBytes: 64 * 1024 };

/** Resolves a token's key from a remote key set; rejects with an auth error (TetherError). */
export type RemoteKeys = (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey | KeyObject>;

/**
 * A key set fetched from an http(s) URL with jose's createRemoteJWKSet: cached for
 * cacheMaxAgeMs, refetched for an unknown kid at most once per cooldownMs, each fetch bounded
 * by timeoutMs and its body by maxBytes (jose's customFetch hook). Keys are chosen by the
 * token's `alg` and `kid` within this set only. Failures to fetch are UNAVAILABLE; a token
 * whose key is not in the set is UNAUTHENTICATED.
 */
export function remoteKeySet(url: string, limits: Partial<JwksLimits> = {}): RemoteKeys {
  const l = { ...JWKS_DEFAULTS, ...limits };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TetherError('INVALID_ARGUMENT', `--jwks-url is not a URL: "${url}"`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
    throw new TetherError('INVALID_ARGUMENT', `--jwks-url must be http(s), got ${parsed.protocol}`);
  const set = createRemoteJWKSet(parsed, {
    timeoutDuration: l.timeoutMs,
    cooldownDuration: l.cooldownMs,
    cacheMaxAge: l.cacheMaxAgeMs,
    [customFetch]: cappedFetch(l.maxBytes),
  });
  return async (header, token) => {
    try {
      return await set(header, token);
    } catch (err) {
      if (err instanceof TetherError) throw err;
      if (err instanceof errors.JOSEError) throw err; // explained by the verifier
      throw authError(
        'UNAVAILABLE',
        'keys_unavailable',
        `cannot fetch the key set (JWKS) from ${parsed.origin}: ${(err as Error).message}`,
      );
    }
  };
}

/** fetch() that reads at most maxBytes of the body (declared or streamed), then gives up. */
function cappedFetch(maxBytes: number): FetchImplementation {
  const tooBig = () => authError('UNAVAILABLE', 'keys_unavailable', `the key set (JWKS) response is larger than ${maxBytes} bytes`);
  return async (url, init) => {
    const res = await fetch(url, init);
    if (Number(res.headers.get('content-length') ?? 0) > maxBytes) {
      await res.body?.cancel().catch(() => {});
      throw tooBig();
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (res.body) {
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) {
          await reader.cancel().catch(() => {});
          throw tooBig();
        }
        chunks.push(value);
      }
    }
    // jose only accepts a 200; other statuses keep no body (204/304 may not have one).
    return new Response(res.status === 200 ? Buffer.concat(chunks) : null, {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
}
