/**
 * The HTTP/2 receive window on both ends of a gRPC link (GRPC_DEFAULTS.flowControlWindowBytes):
 * the gateway's listener widens its sessions (grpc-js's server has no option for it), and our
 * dialer asks grpc-js for it. Checked on the wire, from the peer's side, with Node's own http2:
 * the SETTINGS the peer received and the connection window it may send into.
 */
import { connect, createServer, type ClientHttp2Session, type Http2Session, type ServerHttp2Session } from 'node:http2';
import { describe, it } from 'vitest';
import { GRPC_DEFAULTS } from '../core/channel/grpc.js';
import { dial } from '../core/link/dial.js';
import { startGrpcListener } from '../gateway/listen/listen-grpc.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { waitFor } from './support/wait.js';

const WINDOW = GRPC_DEFAULTS.flowControlWindowBytes;

/** Waits until `peer`'s window reached `session`: its SETTINGS (per stream), then its WINDOW_UPDATE on stream 0 (the connection's window is no setting). */
async function windowsGiven(session: Http2Session, peer: string): Promise<void> {
  await waitFor(
    () => session.remoteSettings?.initialWindowSize === WINDOW,
    5_000,
    () => `${peer}'s SETTINGS to give a stream window of ${WINDOW} (has ${session.remoteSettings?.initialWindowSize})`,
  );
  await waitFor(
    () => (session.state.remoteWindowSize ?? 0) >= WINDOW,
    5_000,
    () => `${peer}'s connection window to reach ${WINDOW} (has ${session.state.remoteWindowSize})`,
  );
}

describe('gRPC links: the HTTP/2 receive window', () => {
  const cleanups = cleanupsPerTest();

  it("the gateway's listener gives its peers its window, per stream and for the connection", async () => {
    const listener = await startGrpcListener({ host: '127.0.0.1', port: 0, onChannel: () => {} });
    cleanups.push(() => listener.close({ graceMs: 0 }));
    const session: ClientHttp2Session = connect(`http://127.0.0.1:${listener.port}`);
    session.on('error', () => {});
    cleanups.push(() => new Promise<void>((done) => session.close(() => done())));

    await windowsGiven(session, 'the listener');
  });

  it('our dialer gives the gateway its window, per stream and for the connection', async () => {
    const sessions: ServerHttp2Session[] = [];
    const server = createServer();
    server.on('session', (s) => {
      s.on('error', () => {});
      sessions.push(s);
    });
    server.on('stream', () => {}); // holds the Connect call unanswered: the dial only has to open
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const port = (server.address() as { port: number }).port;
    const dialing = dial(`grpc://127.0.0.1:${port}`, { connectTimeoutMs: 5_000 }).then(
      (channel) => channel.close(),
      () => {}, // this server never accepts the stream: the dial ends UNAVAILABLE once it is gone
    );
    cleanups.push(() => dialing); // last: the server going away ends the dial
    cleanups.push(async () => {
      for (const s of sessions) s.destroy();
      await new Promise<void>((closed) => server.close(() => closed()));
    });

    await waitFor(() => sessions.length === 1, 5_000, 'the dialer to connect');
    const session = sessions[0]!;
    await windowsGiven(session, 'the dialer');
  });
});
