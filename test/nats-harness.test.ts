import { afterEach, describe, expect, it } from 'vitest';
import { createConnection } from 'node:net';
import { startNatsServer, type NatsServer } from './support/nats-server.js';
import { hasTool } from './support/tools.js';

/** Whether something accepts TCP connections on the port now. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port }, () => (s.destroy(), resolve(true)));
    s.on('error', () => resolve(false));
  });
}

describe.skipIf(!hasTool('nats-server'))('the nats-server test harness', () => {
  let nats: NatsServer | undefined;
  afterEach(async () => {
    await nats?.stop();
  });

  it('starts JetStream on a free port, restarts on the same port and store, and stops', async () => {
    nats = await startNatsServer();
    expect(nats.url).toBe(`nats://127.0.0.1:${nats.port}`);
    expect(nats.log()).toContain('Starting JetStream');
    expect(await accepts(nats.port)).toBe(true);
    const first = nats.pid;
    await nats.restart();
    expect(nats.pid).not.toBe(first);
    expect(await accepts(nats.port)).toBe(true);
    await nats.stop();
    expect(await accepts(nats.port)).toBe(false);
  });
});
