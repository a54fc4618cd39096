import { Client, connectivityState, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import type { Channel } from '../channel/channel.js';
import { CHANNEL_DEFAULTS } from '../channel/channel.js';
import { closeInfoFromStatus, GrpcClientChannel, grpcLinkOptions } from '../channel/grpc.js';
import { loadGatewayService } from '../channel/proto.js';
import { BATCH_METADATA_KEY, batchBytesFromOffer, batchOffer } from '../wire/grpc-batch.js';
import { TetherError } from '../errors.js';
import { DIAL_DEFAULTS, type DialOptions } from './dial-options.js';

/**
 * Opens a gRPC channel (tether.v1.Gateway/Connect) to a grpc:// (plaintext) or grpcs://
 * (TLS; `opts.ca` is the trusted root, system roots otherwise) gateway URL. Sends
 * `authorization: Bearer <token>` metadata when `opts.token` is set.
 *
 * Resolves once the connection is ready and the gateway accepted the stream (its response
 * headers arrived), all within `connectTimeoutMs`. Rejects with UNAVAILABLE when it cannot
 * connect in time or the connection attempt fails (refused, unreachable, TLS handshake: at
 * once, as a WebSocket dial does, so the link's backoff and fail-over decide what next), or
 * with the gateway's code (e.g. UNAUTHENTICATED) when it refuses the stream. Each dial owns its own HTTP/2 connection, closed when the channel's call ends.
 * Retries are off: they would buffer writes and hide backpressure.
 */
export function dialGrpc(url: URL, opts: DialOptions): Promise<Channel> {
  if (url.protocol !== 'grpc:' && url.protocol !== 'grpcs:') {
    return Promise.reject(new TetherError('INVALID_ARGUMENT', `not a gRPC URL: ${url.href} (expected grpc:// or grpcs://)`));
  }
  const tls = url.protocol === 'grpcs:';
  const target = `${url.hostname}:${url.port || (tls ? '443' : '80')}`;
  const where = `${url.protocol}//${target}`;
  const maxFrameBytes = opts.maxFrameBytes ?? CHANNEL_DEFAULTS.maxFrameBytes;
  const timeoutMs = opts.connectTimeoutMs ?? DIAL_DEFAULTS.connectTimeoutMs;
  const deadline = Date.now() + timeoutMs;
  const service = loadGatewayService();

  const client = new Client(
    target,
    tls ? credentials.createSsl(opts.ca ?? null, opts.tlsKey ?? null, opts.tlsCert ?? null) : credentials.createInsecure(),
    {
      ...grpcLinkOptions({ maxFrameBytes, ...opts.grpc }),
      'grpc.enable_retries': 0,
      // One connection per dial: a lost or closed link never takes another channel with it.
      'grpc.use_local_subchannel_pool': 1,
    },
  );

  return new Promise((resolve, reject) => {
    whenReady(client, deadline, (err) => {
      if (err) {
        client.close();
        reject(
          new TetherError('UNAVAILABLE', `cannot connect to ${where}${err === FAILED ? '' : ` within ${timeoutMs} ms`}: ${err.message}`),
        );
        return;
      }
      const metadata = new Metadata();
      if (opts.token) metadata.set('authorization', `Bearer ${opts.token}`);
      metadata.set(BATCH_METADATA_KEY, batchOffer(maxFrameBytes)); // we take batches (core/wire/grpc-batch.ts)
      const { connect } = service;
      const call = client.makeBidiStreamRequest(connect.path, connect.requestSerialize, connect.responseDeserialize, metadata);

      const cleanup = () => {
        clearTimeout(timer);
        call.off('metadata', onAccepted);
        call.off('status', onRefused);
        call.off('error', onRefused);
      };
      const fail = (error: TetherError) => {
        cleanup();
        call.on('error', () => {}); // the outcome is reported through reject()
        call.cancel();
        client.close();
        reject(error);
      };
      const onAccepted = (headers: Metadata) => {
        cleanup();
        // Batches towards a gateway that offered to take them in its response headers.
        const offer = headers.get(BATCH_METADATA_KEY)[0];
        const batchBytes = batchBytesFromOffer(typeof offer === 'string' ? offer : undefined);
        resolve(new GrpcClientChannel(call, url.host, { maxFrameBytes, batchBytes, onFinished: () => client.close() }));
      };
      const onRefused = (status: ServiceError | { code: number; details: string }) => {
        const info = closeInfoFromStatus(status);
        const code = info.code === 'OK' ? 'UNAVAILABLE' : info.code;
        fail(new TetherError(code, `gateway at ${where} refused the stream: ${info.reason}`));
      };
      const timer = setTimeout(
        () => fail(new TetherError('UNAVAILABLE', `gateway at ${where} did not accept the stream within ${timeoutMs} ms`)),
        Math.max(0, deadline - Date.now()),
      );
      call.once('metadata', onAccepted);
      call.once('status', onRefused);
      call.once('error', onRefused);
    });
  });
}

/** The reason given when grpc-js reports the connection attempt failed (it says no more). */
const FAILED = new Error('connection failed (refused, unreachable or TLS handshake failed)');

/**
 * Like Client.waitForReady, but gives up at the first failed attempt instead of letting
 * grpc-js retry with its own backoff until the deadline.
 */
function whenReady(client: Client, deadline: number, done: (err?: Error) => void): void {
  const channel = client.getChannel();
  const step = () => {
    const state = channel.getConnectivityState(true);
    if (state === connectivityState.READY) return done();
    if (state === connectivityState.TRANSIENT_FAILURE || state === connectivityState.SHUTDOWN) return done(FAILED);
    channel.watchConnectivityState(state, deadline, (err) => (err ? done(err) : step()));
  };
  step();
}
