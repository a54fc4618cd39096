import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeFrame, encodeFrame, type GatewayFrame } from '../wire/grpc-frame.js';
import { loadSync, type MethodDefinition, type Options, type ServiceDefinition } from '@grpc/proto-loader';

/**
 * The one set of proto-loader options, shared by the runtime loader and any future type
 * generation (`proto-loader-gen-types` takes the same flags), so both see the same shapes:
 * field names as written in the .proto, 64-bit integers and enums as strings, defaults
 * filled in, oneofs named.
 */
export const PROTO_LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
} as const satisfies Options;

/** Path of the gateway proto, relative to the proto root. */
const GATEWAY_PROTO = 'tether/v1/gateway.proto';

/** The loaded tether.v1.Gateway service. */
export interface GatewayService {
  /** Service definition to hand to grpc's `Server.addService`. */
  definition: ServiceDefinition;
  /** The bidirectional Connect method (path, serializers). */
  connect: MethodDefinition<GatewayFrame, GatewayFrame>;
}

/**
 * Finds `<package root>/proto` (every .proto of the package is under it). This file runs from
 * source (`core/channel/proto.ts` under vitest) and compiled (`dist/core/channel/proto.js`),
 * at different depths below the package root, so walk up a bounded number of levels instead
 * of hard-coding one.
 */
export function findProtoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, GATEWAY_PROTO))) return candidate;
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new Error(`cannot find proto/${GATEWAY_PROTO} above ${fileURLToPath(import.meta.url)}`);
}

/** What the channels hand grpc-js: a Frame, or one they encoded with core/wire/grpc-frame.ts. */
function serializeFrame(frame: GatewayFrame | Buffer): Buffer {
  return Buffer.isBuffer(frame) ? frame : encodeFrame(frame);
}

/**
 * The service loaded once. Module state, but no cache that changes: a pure function of the
 * package's own proto files, the same object for every listener and dialer, never written after
 * the first load (that one load sets its serializers).
 */
let cached: GatewayService | undefined;

/**
 * Loads tether.v1.Gateway from `<package root>/proto` on first call (synchronously, with
 * {@link PROTO_LOADER_OPTIONS}) and returns the same object on every later call. Throws if the
 * proto file is missing, which is a packaging bug, not a runtime condition.
 */
export function loadGatewayService(): GatewayService {
  if (cached) return cached;
  const root = findProtoRoot();
  const pkg = loadSync(GATEWAY_PROTO, { ...PROTO_LOADER_OPTIONS, includeDirs: [root] });
  const definition = pkg['tether.v1.Gateway'] as ServiceDefinition | undefined;
  const connect = definition?.Connect as MethodDefinition<GatewayFrame, GatewayFrame> | undefined;
  if (!definition || !connect) throw new Error(`tether.v1.Gateway/Connect is missing from ${join(root, GATEWAY_PROTO)}`);
  // Our own codec of Frame on both ends (core/wire/grpc-frame.ts); the same method object serves the
  // server and its clients. proto-loader's stays available to the codec's test. The channels
  // write Frames they encoded already (a broadcast frame once for every client, a batch once):
  // a Buffer is taken as the encoded Frame it is.
  Object.assign(connect, {
    requestSerialize: serializeFrame,
    responseSerialize: serializeFrame,
    requestDeserialize: decodeFrame,
    responseDeserialize: decodeFrame,
  });
  cached = { definition, connect };
  return cached;
}
