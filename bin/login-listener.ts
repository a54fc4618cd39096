/**
 * The loopback listener of `tether login`: one HTTP server on 127.0.0.1, port 0, that waits
 * for the browser to come back with `?code=…&state=…` and answers it with a short page.
 * The only HTTP server the CLI runs; closed as soon as the one callback arrived.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TetherError } from '../core/errors.js';

/** A listener waiting for one callback. */
export interface LoginListener {
  port: number;
  /** Resolves with the code once a callback with the expected state arrives; DEADLINE_EXCEEDED after `timeoutMs`. */
  code: Promise<string>;
  close(): void;
}

/** Starts the listener; a callback whose state is not `state` is refused and waited past. */
export async function listenForLogin(state: string, timeoutMs: number): Promise<LoginListener> {
  let settle!: { resolve: (code: string) => void; reject: (err: Error) => void };
  const code = new Promise<string>((resolve, reject) => (settle = { resolve, reject }));
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const got = url.searchParams.get('code');
    const page = (status: number, text: string) =>
      res
        .writeHead(status, {
          'content-type': 'text/html; charset=utf-8',
          'cache-control': 'no-store',
          'content-security-policy': "default-src 'none'",
        })
        .end(`<!doctype html><meta charset="utf-8"><title>tether login</title><p>${text}</p>`);
    if (url.pathname !== '/callback' || !got || url.searchParams.get('state') !== state)
      return page(400, 'This is not the sign-in this terminal is waiting for.');
    res.on('finish', () => settle.resolve(got)); // closed only once the browser has its answer
    page(200, 'Signed in. You can close this tab and go back to the terminal.');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const timer = setTimeout(
    () =>
      settle.reject(
        new TetherError('DEADLINE_EXCEEDED', `no sign-in came back within ${Math.round(timeoutMs / 1000)} s: run tether login again`),
      ),
    timeoutMs,
  );
  const close = () => {
    clearTimeout(timer);
    server.close();
    server.closeAllConnections();
  };
  void code.then(close, close);
  return { port: (server.address() as AddressInfo).port, code, close };
}
