import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST a receiver got: its headers and raw body. */
export interface ReceivedPost {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A webhook receiver on 127.0.0.1 port 0 that answers each POST with the next status of `statuses` (then 200). */
export interface WebhookReceiver {
  url: string;
  posts: ReceivedPost[];
  close(): Promise<void>;
}

export async function startWebhookReceiver(statuses: number[] = []): Promise<WebhookReceiver> {
  const posts: ReceivedPost[] = [];
  const queue = [...statuses];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      posts.push({ path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(queue.shift() ?? 200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    posts,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
