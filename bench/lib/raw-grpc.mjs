/**
 * The raw gRPC baseline's service: one bidi-streaming method whose messages are raw bytes
 * (identity serializers), so grpc-js does framing and HTTP/2 and nothing else.
 */
import grpc from '@grpc/grpc-js';

const id = (b) => b;
export const RELAY_SERVICE = {
  Connect: {
    path: '/bench.Relay/Connect',
    requestStream: true,
    responseStream: true,
    requestSerialize: id,
    requestDeserialize: id,
    responseSerialize: id,
    responseDeserialize: id,
  },
};

const Client = grpc.makeGenericClientConstructor(RELAY_SERVICE, 'Relay');

/** Opens one stream on its own connection; role goes in metadata. Resolves once the connection is ready. */
export function openRawGrpc(addr, role) {
  const client = new Client(addr, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
  });
  return new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + 10_000, (err) => {
      if (err) {
        client.close();
        return reject(err);
      }
      const md = new grpc.Metadata();
      md.set('role', role);
      const call = client.Connect(md);
      call.on('error', () => {});
      resolve({ call, close: () => (call.cancel(), client.close()) });
    });
  });
}
