import {
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { findProtoRoot, PROTO_LOADER_OPTIONS } from '../../core/channel/proto.js';

/** Path of the health proto, relative to the proto root. */
const HEALTH_PROTO = 'grpc/health/v1/health.proto';

/** Services the health service answers for: the whole server ("") and the gateway's own. */
export const HEALTH_SERVICES = ['', 'tether.v1.Gateway'] as const;

/** How often an open Watch re-reads readiness and sends a change. */
export const HEALTH_WATCH_POLL_MS = 1_000;

/** Open Watch calls at once; more are refused with RESOURCE_EXHAUSTED. */
export const MAX_HEALTH_WATCHES = 100;

type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
interface HealthRequest {
  service: string;
}
interface HealthResponse {
  status: ServingStatus;
}

/** The grpc.health.v1.Health service for a gRPC listener, as handed to `Server.addService`. */
export interface GrpcHealthService {
  definition: ServiceDefinition;
  implementation: UntypedServiceImplementation;
  /** Sends NOT_SERVING to every open Watch and ends it (the listener is closing). Idempotent. */
  shutdown(): void;
}

let definition: ServiceDefinition | undefined;

/**
 * The standard gRPC health service (Check, Watch, List), reporting SERVING while `isReady()`
 * is true and NOT_SERVING otherwise, for "" and tether.v1.Gateway; NOT_FOUND (Check) or
 * SERVICE_UNKNOWN (Watch, call kept open) for any other name. `isReady` is the same check
 * /readyz answers with, so both always agree. A Watch sends the current status at once and
 * then each change, polled every `pollMs`; it is cleaned up when the caller cancels.
 */
export function grpcHealthService(isReady: () => boolean, opts: { pollMs?: number } = {}): GrpcHealthService {
  definition ??= loadSync(HEALTH_PROTO, { ...PROTO_LOADER_OPTIONS, includeDirs: [findProtoRoot()] })[
    'grpc.health.v1.Health'
  ] as ServiceDefinition;
  const pollMs = opts.pollMs ?? HEALTH_WATCH_POLL_MS;
  const known = (service: string) => (HEALTH_SERVICES as readonly string[]).includes(service);
  const current = (service: string): ServingStatus => (!known(service) ? 'SERVICE_UNKNOWN' : isReady() ? 'SERVING' : 'NOT_SERVING');
  const watches = new Map<ServerWritableStream<HealthRequest, HealthResponse>, NodeJS.Timeout>();
  let shut = false;

  const implementation: UntypedServiceImplementation = {
    Check(call: ServerUnaryCall<HealthRequest, HealthResponse>, callback: sendUnaryData<HealthResponse>) {
      const service = call.request.service ?? '';
      if (!known(service)) callback({ code: status.NOT_FOUND, details: `unknown service ${JSON.stringify(service)}` });
      else callback(null, { status: shut ? 'NOT_SERVING' : current(service) });
    },
    Watch(call: ServerWritableStream<HealthRequest, HealthResponse>) {
      const service = call.request.service ?? '';
      if (shut || watches.size >= MAX_HEALTH_WATCHES) {
        call.emit('error', {
          code: shut ? status.UNAVAILABLE : status.RESOURCE_EXHAUSTED,
          details: shut ? 'gateway closing' : `more than ${MAX_HEALTH_WATCHES} health watches open`,
        });
        return;
      }
      let last = current(service);
      call.write({ status: last });
      const timer = setInterval(() => {
        const now = current(service);
        if (now !== last) call.write({ status: (last = now) });
      }, pollMs);
      timer.unref();
      watches.set(call, timer);
      call.on('cancelled', () => {
        clearInterval(timer);
        watches.delete(call);
      });
    },
    List(
      _call: ServerUnaryCall<object, { statuses: Record<string, HealthResponse> }>,
      callback: sendUnaryData<{ statuses: Record<string, HealthResponse> }>,
    ) {
      callback(null, { statuses: Object.fromEntries(HEALTH_SERVICES.map((s) => [s, { status: shut ? 'NOT_SERVING' : current(s) }])) });
    },
  };

  return {
    definition,
    implementation,
    shutdown() {
      if (shut) return;
      shut = true;
      for (const [call, timer] of watches) {
        clearInterval(timer);
        call.write({ status: 'NOT_SERVING' });
        call.end();
      }
      watches.clear();
    },
  };
}
