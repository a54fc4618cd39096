import type { Channel } from '../channel/channel.js';
import { TetherError } from '../errors.js';
import type { DialOptions } from './dial-options.js';
import { dialWs } from './dial-ws.js';

export type { DialOptions, GrpcDialSettings, WsDialSettings } from './dial-options.js';

/** Opens one channel to the gateway at a URL of its scheme. Rejects with a TetherError. */
export type Dialer = (url: URL, opts: DialOptions) => Promise<Channel>;

/**
 * URL scheme → dialer, as a value: whoever composes the program (bin/) builds one and hands
 * it to the links that dial. Nothing above the link knows which transport is used. Immutable:
 * {@link Dialers.with} returns a new registry, so one program's extra scheme (the gateway's
 * in-process ACP loopback) is seen by no one else.
 */
export class Dialers {
  private readonly byScheme: ReadonlyMap<string, Dialer>;

  /** `schemes` maps a URL scheme with its colon (`'grpc:'`) to its dialer. */
  constructor(schemes: Iterable<readonly [string, Dialer]>) {
    this.byScheme = new Map(schemes);
  }

  /** A registry with every dialer of this one and `dialer` for `scheme` (e.g. 'tether-loopback:'). */
  with(scheme: string, dialer: Dialer): Dialers {
    return new Dialers([...this.byScheme, [scheme, dialer]]);
  }

  /** Parses a gateway URL, throwing INVALID_ARGUMENT with the accepted forms when it is wrong. */
  parse(raw: string): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new TetherError('INVALID_ARGUMENT', `not a gateway URL: "${raw}" (expected ws://HOST:PORT, wss://, grpc:// or grpcs://)`);
    }
    if (!this.byScheme.has(url.protocol)) {
      throw new TetherError(
        'INVALID_ARGUMENT',
        `unsupported gateway URL scheme "${url.protocol}" in "${raw}" (supported: ${[...this.byScheme.keys()].join(', ')})`,
      );
    }
    return url;
  }

  /** Opens one channel to the gateway at `raw`. Rejects with a TetherError. */
  async dial(raw: string, opts: DialOptions = {}): Promise<Channel> {
    const url = this.parse(raw);
    return this.byScheme.get(url.protocol)!(url, opts);
  }
}

/**
 * gRPC's modules (grpc-js, proto-loader, protobufjs) load on the first grpc:// dial: a fifth of
 * a client command's start (`tether sessions` 0.25 -> 0.20 CPU-s), paid by every ws:// user.
 */
const dialGrpc: Dialer = async (url, opts) => (await import('./dial-grpc.js')).dialGrpc(url, opts);

/** A new registry of the house's transports: ws:, wss:, grpc:, grpcs:. */
export function standardDialers(): Dialers {
  return new Dialers([
    ['ws:', dialWs],
    ['wss:', dialWs],
    ['grpc:', dialGrpc],
    ['grpcs:', dialGrpc],
  ]);
}

/** Opens one channel through the standard transports (tests and one-shot tools; programs use a {@link Dialers}). */
export function dial(raw: string, opts: DialOptions = {}): Promise<Channel> {
  return standardDialers().dial(raw, opts);
}
