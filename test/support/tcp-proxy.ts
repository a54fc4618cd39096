import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

/** A byte-for-byte TCP proxy in front of a gateway URL, so a test can cut a client's link. */
export interface TcpProxy {
  /** The gateway URL with the proxy's port (same scheme and host). */
  url: string;
  /**
   * Network loss neither side caused: destroys both legs of every relayed connection. With
   * `downMs`, new connections are dropped at once for that long, so the client's first
   * retries fail too and frames pile up at the gateway meanwhile.
   */
  cut(downMs?: number): void;
  /** How many connections the proxy has accepted and relayed so far. */
  readonly connections: number;
  /** Cuts everything and stops listening. Idempotent. */
  close(): Promise<void>;
}

/** Starts a proxy on 127.0.0.1:0 relaying to the host and port of `targetUrl`. */
export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  let downUntil = 0;
  let connections = 0;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  };
  const server = createServer((inbound) => {
    if (Date.now() < downUntil) {
      inbound.on('error', () => {});
      inbound.destroy();
      return;
    }
    connections++;
    const outbound = connect(Number(target.port), target.hostname);
    track(inbound);
    track(outbound);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const url = targetUrl.replace(`${target.hostname}:${target.port}`, `127.0.0.1:${port}`);
  const cut = (downMs = 0) => {
    downUntil = Date.now() + downMs;
    for (const socket of sockets) socket.destroy();
  };
  let closing: Promise<void> | undefined;
  return {
    url,
    cut,
    get connections() {
      return connections;
    },
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        cut();
        server.close(() => resolve());
      })),
  };
}
