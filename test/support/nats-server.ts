/**
 * A real NATS server with JetStream for tests: Debian's `nats-server` (or
 * `$TETHER_TEST_NATS_SERVER`), on 127.0.0.1, a free port, and a store folder of its own. It
 * requires a user and password (random per server) unless `auth: 'none'`, as a cluster's
 * NATS must; `tls` serves TLS and requires a client certificate; `config` runs it from a
 * nats-server config file instead (its own authorization: the user named there, with a random
 * password handed to the server in the variable the file reads it from).
 * `restart()` brings it back on the same port and store (clients reconnect to the same URL and
 * JetStream keeps what it held); `stop()` ends it and removes the folder. Every wait is bounded.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { makeTempDir, type TempDir } from './claude-cli.js';
import { missingToolLine, toolPath } from './tools.js';

const READY_LINE = 'Server is ready';
const LISTEN_LINE = /Listening for client connections on [^\s]*:(\d+)/;
const START_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 5_000;

export interface NatsServer {
  /** nats://127.0.0.1:PORT (tls:// with `tls`), the same across restarts, without credentials. */
  readonly url: string;
  /** The user and password it requires (undefined with `auth: 'none'` or a config file). */
  readonly user?: string;
  readonly pass?: string;
  /** `url` with the user and password in it (nats://USER:PASS@127.0.0.1:PORT), or `url`. */
  readonly authUrl: string;
  readonly port: number;
  /** The JetStream store folder (kept across restarts). */
  readonly storeDir: string;
  /** The server's process id now (changes on restart). */
  readonly pid: number;
  /** Everything the server logged so far, this run and earlier ones. */
  log(): string;
  /** Ends the server (SIGTERM, SIGKILL after 5 s) without removing its store. */
  halt(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and store (halting it first if it runs). */
  restart(): Promise<void>;
  /** Ends the server and removes its store folder. Idempotent. */
  stop(): Promise<void>;
}

/** The server binary: `$TETHER_TEST_NATS_SERVER`, `nats-server` on PATH, or Debian's path (test/support/tools.ts). */
export function natsServerBinary(): string {
  const path = toolPath('nats-server');
  if (!path) throw new Error(missingToolLine('nats-server'));
  return path;
}

/** TLS for the server: its certificate and key, and the CA its clients' certificates must chain to. */
export interface NatsTls {
  cert: string;
  key: string;
  ca: string;
}

/**
 * Starts a server on a free port (`-p -1`, the port read from its log), with JetStream unless
 * `jetstream: false` (to test a server without it).
 */
export async function startNatsServer(
  opts: { jetstream?: boolean; auth?: 'user' | 'none'; tls?: NatsTls; config?: { file: string; user: string; passwordEnv: string } } = {},
): Promise<NatsServer> {
  const bin = natsServerBinary();
  const user = opts.config?.user ?? (opts.auth === 'none' ? undefined : 'tether-gw');
  // A letter first: nats-server reads a $VARIABLE in its config as a config value (digits first would be a number).
  const pass = user && `p${randomBytes(12).toString('hex')}`;
  const env = opts.config && pass ? { ...process.env, [opts.config.passwordEnv]: pass } : process.env;
  const extra = [
    ...(opts.config ? ['-c', opts.config.file] : user && pass ? ['--user', user, '--pass', pass] : []),
    ...(opts.tls ? ['--tls', '--tlscert', opts.tls.cert, '--tlskey', opts.tls.key, '--tlsverify', '--tlscacert', opts.tls.ca] : []),
  ];
  const scheme = opts.tls ? 'tls' : 'nats';
  const store: TempDir = makeTempDir('tether-nats-');
  let logText = '';
  let child: ChildProcess | undefined;
  let port = -1;
  let stopped = false;

  const launch = async (wantPort: number): Promise<void> => {
    const js = opts.jetstream === false ? [] : ['-js'];
    const p = spawn(bin, [...js, ...extra, '-a', '127.0.0.1', '-p', String(wantPort), '-sd', store.path], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    });
    child = p;
    const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
    const started = Date.now();
    let runLog = '';
    const onData = (d: Buffer) => {
      runLog += d.toString();
      logText += d.toString();
    };
    p.stdout!.on('data', onData);
    p.stderr!.on('data', onData);
    let gone = false;
    void exited.then(() => (gone = true));
    while (!runLog.includes(READY_LINE)) {
      if (gone) throw new Error(`nats-server exited before it was ready:\n${runLog}`);
      if (Date.now() - started > START_TIMEOUT_MS) {
        p.kill('SIGKILL');
        throw new Error(`nats-server not ready within ${START_TIMEOUT_MS} ms:\n${runLog}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    const m = LISTEN_LINE.exec(runLog);
    if (!m) throw new Error(`nats-server did not say which port it listens on:\n${runLog}`);
    port = Number(m[1]);
  };

  const halt = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<void> => {
    const p = child;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
    p.kill(signal);
    const t = setTimeout(() => p.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(t);
  };

  await launch(-1);
  return {
    get url() {
      return `${scheme}://127.0.0.1:${port}`;
    },
    user,
    pass,
    get authUrl() {
      return user ? `${scheme}://${user}:${pass}@127.0.0.1:${port}` : `${scheme}://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    storeDir: store.path,
    get pid() {
      return child?.pid ?? -1;
    },
    log: () => logText,
    halt,
    async restart() {
      await halt();
      await launch(port);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await halt();
      store.cleanup();
    },
  };
}
