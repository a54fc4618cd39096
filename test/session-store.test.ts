import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Gateway } from '../gateway/gateway.js';
import type { Member } from '../gateway/session/session.js';
import { FileSessionStore } from '../gateway/session/session-store.js';
import { encodeLineFrame, frameBuffer } from '../core/wire/session-frame.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';

/** A frame whose line is not in JSON.stringify's form: the store must keep its bytes as they are. */
const frame = (id: string, seq: number) =>
  encodeLineFrame(id, seq, 'engine', Buffer.from(`{"type": "assistant", "n": ${seq}, "pad": "\\u00e9${'x'.repeat(60)}"}`));

/** The embedded store stays bounded on disk, and a compacted session restores with an explicit gap. */
describe('file session store', () => {
  let dir: TempDir | undefined;
  afterEach(() => dir?.cleanup());

  it('compacts a long log to its newest frames and inputs, and restores it with a gap before them', () => {
    dir = makeTempDir('tether-store-');
    const id = 'sess-1';
    const store = new FileSessionStore(dir.path, { maxLogBytes: 8 * 1024, keepFrames: 20 });
    store.create({ id, agent: 'a', engine: 'demo', owner: 'alice', options: {}, created_at: new Date().toISOString() });
    for (let seq = 1; seq <= 400; seq++) {
      store.appendFrame(id, { seq, agentSeq: seq, bytes: frame(id, seq) });
      if (seq % 50 === 0) store.appendInput(id, { seq: seq / 50, key: `alice\u0000in-${seq}`, line: { type: 'keep_alive' } });
    }
    const size = statSync(join(dir.path, id, 'log.ndjson')).size;
    expect(size).toBeLessThanOrEqual(8 * 1024 + 512);
    const [restored] = store.loadAll();
    const seqs = restored.frames.map((f) => f.seq);
    expect(seqs.at(-1)).toBe(400);
    seqs.forEach((s, n) => n && expect(s).toBe(seqs[n - 1] + 1));
    expect(seqs.length).toBeGreaterThanOrEqual(20);
    expect(restored.inputs.map((i) => i.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    for (const f of restored.frames) expect(frameBuffer(f.bytes).equals(frameBuffer(frame(id, f.seq)))).toBe(true);
    store.close();

    // A gateway started on that folder holds the tail, and says so to a client asking for seq 1.
    const gateway = new Gateway({ store: new FileSessionStore(dir.path) });
    const session = gateway.directory.get(id)!;
    expect(session.info().last_seq).toBe(400);
    const got: string[] = [];
    const member: Member = {
      clientId: 'c1',
      principal: 'alice',
      transport: 'memory',
      sendFrame: (b) => got.push(b.toString('utf8')),
      sendReply: () => {},
    };
    session.attach(member, 'owner', 1);
    const first = JSON.parse(got[0]).params;
    expect(first.event).toMatchObject({ subtype: 'gap', from_seq: 1 });
    expect(JSON.parse(got[1]).params.seq).toBe(seqs[0]);
    void gateway.close();
  });
});
