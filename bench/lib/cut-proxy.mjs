/**
 * A TCP proxy on 127.0.0.1 in front of one gateway port, for the reconnect figure: the
 * client dials the proxy, and `cut()` destroys every connection through it at once (both
 * sides, as a dropped network path would look to the client: the socket closes). New
 * connections are served as before, so the client's own reconnect goes through it again.
 */
import { createServer, connect } from 'node:net';

export async function startCutProxy(targetPort, targetHost = '127.0.0.1') {
  const pairs = new Set();
  const server = createServer((down) => {
    const up = connect(targetPort, targetHost);
    const pair = { down, up };
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    down.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    port: server.address().port,
    /** Destroys every open connection; returns how many there were. */
    cut() {
      const n = pairs.size;
      for (const { down, up } of [...pairs]) {
        down.destroy();
        up.destroy();
      }
      pairs.clear();
      return n;
    },
    close: () =>
      new Promise((resolve) => {
        for (const { down, up } of pairs) down.destroy(), up.destroy();
        server.close(() => resolve());
      }),
  };
}

/** `url` with its port replaced by `port` (ws://… or grpc://…). */
export function viaPort(url, port) {
  const u = new URL(url);
  u.port = String(port);
  return u.toString().replace(/\/$/, '');
}
