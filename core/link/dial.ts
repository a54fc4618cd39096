import type { Channel } from '../channel/channel.js';
import { TetherError } from '../errors.js';
import { dialGrpc } from './dial-grpc.js';
import { dialWs } from './dial-ws.js';

export interface DialOptions {
  token?: string;
  /** PEM of a private CA to trust (wss://, grpcs://). */
  ca?: Buffer;
  /** PEM client certificate and key, for gateways that require mutual TLS. */
  tlsCert?: Buffer;
  tlsKey?: Buffer;
  maxFrameBytes?: number;
  connectTimeoutMs?: number;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
}

type Dialer = (url: URL, opts: DialOptions) => Promise<Channel>;

/** URL scheme → dialer. Transports register here; nothing above the link knows which is used. */
const dialers = new Map<string, Dialer>([
  ['ws:', dialWs],
  ['wss:', dialWs],
  ['grpc:', dialGrpc],
  ['grpcs:', dialGrpc],
]);

/** Adds a dialer for a URL scheme (e.g. 'grpc:'). */
export function registerDialer(scheme: string, dialer: Dialer): void {
  dialers.set(scheme, dialer);
}

/** Parses a gateway URL, throwing INVALID_ARGUMENT with the accepted forms when it is wrong. */
export function parseGatewayUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TetherError('INVALID_ARGUMENT', `not a gateway URL: "${raw}" (expected ws://HOST:PORT, wss://, grpc:// or grpcs://)`);
  }
  if (!dialers.has(url.protocol)) {
    throw new TetherError('INVALID_ARGUMENT', `unsupported gateway URL scheme "${url.protocol}" in "${raw}" (supported: ${[...dialers.keys()].join(', ')})`);
  }
  return url;
}

/** Opens one channel to the gateway at `raw`. Rejects with a TetherError. */
export function dial(raw: string, opts: DialOptions = {}): Promise<Channel> {
  const url = parseGatewayUrl(raw);
  return dialers.get(url.protocol)!(url, opts);
}
