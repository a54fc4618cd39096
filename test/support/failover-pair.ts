/**
 * Two gateway processes that take turns on one file store, to test fail-over without NATS:
 * gateway A runs from the start; B's ports are reserved up front (so agents and clients can
 * list B's URL before it exists) and B starts, on the same state folder, once A is gone.
 * Authentication is off; every process is stopped by stop().
 */
import { createServer } from 'node:net';
import { makeTempDir, type TempDir } from './claude-cli.js';
import { startTether, type Daemon } from './cli.js';
import type { TransportName } from './stack.js';

export interface FailoverPair {
  /** The shared state folder. */
  state: string;
  /** [A, B] for this transport: what an agent or client is given. */
  urls(t: TransportName): [string, string];
  /** SIGKILLs gateway A (no shutdown: its sockets are cut, its store left as it was). */
  killA(): Promise<void>;
  /** Starts gateway B on its reserved ports and the same store; resolves when it listens. */
  startB(): Promise<void>;
  stop(): Promise<void>;
}

/** A port that was free a moment ago (bound to 0, then released). */
export async function reservePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** `tether gateway` on a store folder; resolves with its ws and grpc URLs once it listens. */
async function startGateway(state: string, port: number, grpcPort: number): Promise<{ daemon: Daemon; ws: string; grpc: string }> {
  const daemon = startTether(['gateway', '--port', String(port), '--grpc-port', String(grpcPort), '--state-dir', state, '--auth', 'off']);
  try {
    const ws = (await daemon.line('gateway: ')).slice('gateway: '.length);
    const grpc = (await daemon.line('grpc: ')).slice('grpc: '.length);
    return { daemon, ws, grpc };
  } catch (err) {
    await daemon.stop('SIGKILL');
    throw err;
  }
}

export async function startFailoverPair(): Promise<FailoverPair> {
  const state: TempDir = makeTempDir('tether-state-');
  const [bPort, bGrpcPort] = [await reservePort(), await reservePort()];
  const b = { ws: `ws://127.0.0.1:${bPort}`, grpc: `grpc://127.0.0.1:${bGrpcPort}` };
  const daemons: Daemon[] = [];
  const a = await startGateway(state.path, 0, 0);
  daemons.push(a.daemon);
  return {
    state: state.path,
    urls: (t) => [a[t], b[t]],
    async killA() {
      const r = await a.daemon.stop('SIGKILL');
      if (r.signal !== 'SIGKILL') throw new Error(`gateway A exited by itself (${r.code}) before the kill`);
    },
    async startB() {
      daemons.push((await startGateway(state.path, bPort, bGrpcPort)).daemon);
    },
    async stop() {
      await Promise.all(daemons.map((d) => d.stop('SIGKILL')));
      state.cleanup();
    },
  };
}
