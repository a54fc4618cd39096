/**
 * Large frames without copies (docs/performance-notebook.md, "100 KB frames"): a large engine line's
 * frame travels as pieces around the line's own bytes and arrives as one message on every
 * transport (joined once, with gRPC's headroom, where a transport needs one Buffer); on WebSocket it is one frame of ours whose head matches what ws writes, the line's
 * Buffer handed to the socket as it is (the agent's body too, masked by the zero key where
 * masking protects nothing); the replay log keeps large frames in recycled slabs and hands out
 * copies; the file store writes the pieces and reads the frame back byte for byte.
 */
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Sender } from 'ws';
import type { Channel } from '../core/channel/channel.js';
import type { WireFrame } from '../core/wire/frame.js';
import { TextPieces } from '../core/wire/text-pieces.js';
import { wsFrameHead, WS_OPCODE } from '../core/wire/ws-frame-head.js';
import { needsMasking } from '../core/link/dial-ws.js';
import { encodeLineFrame, hasFrameHeadroom, LINE_PIECES_MIN_BYTES, readEngineFrame } from '../core/wire/session-frame.js';
import { ReplayLog } from '../gateway/session/history/replay-log.js';
import { FileSessionStore } from '../gateway/session/session-store.js';
import { PAIR_FACTORIES, type ChannelPair } from './support/channel-pairs.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';

/** An engine line of `bytes` bytes, not in JSON.stringify's form (spaces, an escape). */
function line(bytes: number, fill = 'x'): Buffer {
  const head = '{"type": "assistant", "text": "\\u00e9';
  return Buffer.from(head + fill.repeat(bytes - head.length - 2) + '"}');
}

async function next(channel: Channel, ms = 5_000): Promise<WireFrame> {
  const deadline = Date.now() + ms;
  for (;;) {
    const frame = channel.read();
    if (frame !== undefined) return frame;
    if (channel.isClosed || Date.now() > deadline) throw new Error('no frame');
    await Promise.race([channel.readable(), new Promise((r) => setTimeout(r, 50))]);
  }
}

/** Every Buffer the socket under a WsChannel is handed (test-only reach into privates). */
function socketWrites(channel: Channel): Uint8Array[] {
  const socket = (channel as unknown as { socket: Socket }).socket;
  const seen: Uint8Array[] = [];
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  (socket as unknown as { write: (...args: unknown[]) => boolean }).write = (chunk: unknown, ...rest: unknown[]) => {
    if (chunk instanceof Uint8Array) seen.push(chunk);
    return write(chunk, ...rest);
  };
  return seen;
}

describe('the head of a WebSocket frame we write ourselves', () => {
  it('is the head ws writes for the same message, unmasked (server) and masked by the zero key (client)', () => {
    for (const n of [0, 1, 125, 126, 65_535, 65_536, 100_000, 16 * 1024 * 1024]) {
      const payload = Buffer.alloc(n, 0x61);
      for (const [opcode, binary] of [
        [WS_OPCODE.text, false],
        [WS_OPCODE.binary, true],
      ] as const) {
        const server = Sender.frame(payload, { fin: true, rsv1: false, opcode, mask: false, readOnly: false });
        expect(wsFrameHead(opcode, n, 'none').equals(server[0]), `server ${n} ${binary}`).toBe(true);
        const client = Sender.frame(payload, {
          fin: true,
          rsv1: false,
          opcode,
          mask: true,
          readOnly: false,
          generateMask: (m: Buffer) => m.fill(0),
        });
        expect(wsFrameHead(opcode, n, 'zero-key').equals(client[0]), `client ${n} ${binary}`).toBe(true);
      }
    }
  });

  it('is masked by the zero key only where nobody in between can read the bytes', () => {
    expect(needsMasking(new URL('wss://gateway.example.com'))).toBe(false);
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '[::1]']) expect(needsMasking(new URL(`ws://${host}:8080`))).toBe(false);
    for (const host of ['gateway.example.com', '10.0.0.5', '[2001:db8::1]', '128.0.0.1'])
      expect(needsMasking(new URL(`ws://${host}:8080`))).toBe(true);
  });
});

describe('a large line frame as pieces', () => {
  let pair: ChannelPair | undefined;
  afterEach(async () => {
    await pair?.cleanup();
    pair = undefined;
  });

  it('is pieces around the line itself from LINE_PIECES_MIN_BYTES on, one Buffer below, the same text either way', () => {
    const big = line(LINE_PIECES_MIN_BYTES);
    const frame = encodeLineFrame('s-1', 7, 'engine', big);
    expect(frame).toBeInstanceOf(TextPieces);
    expect((frame as TextPieces).pieces[1]).toBe(big); // not a copy
    const small = encodeLineFrame('s-1', 7, 'engine', line(LINE_PIECES_MIN_BYTES - 1));
    expect(Buffer.isBuffer(small)).toBe(true);
    expect(hasFrameHeadroom((frame as TextPieces).joined())).toBe(true); // gRPC writes its prefix there, as for a frame encoded whole
    const text = (frame as TextPieces).joined().toString();
    expect(readEngineFrame(text)).toEqual({ session_id: 's-1', seq: 7, origin: 'engine', line: big.toString() });
    expect(JSON.parse(text).params.message.text.length).toBeGreaterThan(LINE_PIECES_MIN_BYTES - 64);
  });

  for (const transport of ['memory', 'ws', 'grpc'] as const) {
    it(`arrives as one text frame, byte for byte, over ${transport}`, async () => {
      pair = await PAIR_FACTORIES[transport]();
      const frames = [
        encodeLineFrame('s-1', 1, 'engine', line(100_000)),
        encodeLineFrame('s-1', 2, 'engine', line(300_000, 'é')),
      ] as TextPieces[];
      for (const f of frames) expect(pair.server.post(f)).toBe(true);
      expect(pair.server.post('{"after":true}')).toBe(true);
      for (const f of frames) expect(await next(pair.client)).toBe(f.joined().toString());
      expect(await next(pair.client)).toBe('{"after":true}');
    });
  }

  it("keeps its place among ws's own frames on a WebSocket, within one turn of the event loop and across turns", async () => {
    // Large frames are written to the socket by us, small ones by ws: the order must be the order posted.
    pair = await PAIR_FACTORIES.ws();
    const sent: string[] = [];
    const post = (f: TextPieces | string) => {
      sent.push(typeof f === 'string' ? f : f.joined().toString());
      expect(pair!.server.post(f)).toBe(true);
    };
    for (let turn = 0; turn < 3; turn++) {
      for (let n = 0; n < 4; n++) {
        post(`{"turn":${turn},"small":${n}}`);
        if (n % 2 === 0) post(encodeLineFrame('s-1', turn * 10 + n, 'engine', line(LINE_PIECES_MIN_BYTES + n * 1000)) as TextPieces);
      }
      await new Promise((r) => setImmediate(r)); // the next posts start a new turn (a new cork)
    }
    for (const expected of sent) expect(await next(pair.client)).toBe(expected);
  });

  it('is written to a WebSocket as one frame: our head, then the line Buffer itself', async () => {
    pair = await PAIR_FACTORIES.ws();
    const writes = socketWrites(pair.server);
    const big = line(200_000);
    const frame = encodeLineFrame('s-1', 1, 'engine', big) as TextPieces;
    pair.server.post(frame);
    expect(await next(pair.client)).toBe(frame.joined().toString());
    expect(writes.some((w) => w === big)).toBe(true);
    expect(writes.reduce((n, w) => n + w.byteLength, 0)).toBe(
      wsFrameHead(WS_OPCODE.text, frame.byteLength, 'none').length + frame.byteLength,
    );
  });

  it("an agent's large binary body goes to the socket as it is, masked by the zero key, and arrives whole", async () => {
    pair = await PAIR_FACTORIES.ws();
    const writes = socketWrites(pair.client);
    const body = line(150_000);
    expect(pair.client.post({ header: '{"method":"session.output","params":{}}', body })).toBe(true);
    const got = await next(pair.server);
    expect(typeof got).toBe('object');
    expect(Buffer.from((got as { body: Uint8Array }).body).equals(body)).toBe(true);
    expect(writes.some((w) => w === body)).toBe(true);
  });
});

describe('the replay log with large frames', () => {
  it('keeps copies in recycled slabs: bounded, unaffected by the caller, handed out as copies that later frames do not overwrite', () => {
    const log = new ReplayLog({ maxFrames: 10_000, maxBytes: 8 * 1024 * 1024 });
    const appended = Buffer.alloc(100_000, 0x61);
    log.append({ seq: 1, bytes: appended });
    appended.fill(0x62); // the caller (a socket, the store) may go on with its own bytes
    const first = log.since(1);
    expect(first[0].bytes.every((b) => b === 0x61)).toBe(true);
    for (let seq = 2; seq <= 1_000; seq++)
      log.append({ seq, bytes: encodeLineFrame('s', seq, 'engine', line(100_000, String.fromCharCode(0x41 + (seq % 26)))) });
    expect(first[0].bytes.every((b) => b === 0x61)).toBe(true); // its slab was reused meanwhile
    expect(log.slabBytes).toBeLessThanOrEqual(8 * 1024 * 1024 + 3 * 1024 * 1024);
    const tail = log.since(log.firstSeq);
    expect(tail.at(-1)!.seq).toBe(1_000);
    for (const e of tail)
      expect(readEngineFrame(e.bytes.toString())?.line).toBe(line(100_000, String.fromCharCode(0x41 + (e.seq % 26))).toString());
  });
});

describe('the replay log with large frames among many small ones', () => {
  it('reuses a slab that emptied while it was still being filled (it stayed, empty, once a new one followed)', () => {
    const log = new ReplayLog({ maxFrames: 100, maxBytes: 8 * 1024 * 1024 });
    let seq = 0;
    for (let cycle = 0; cycle < 2_000; cycle++) {
      log.append({ seq: ++seq, bytes: Buffer.alloc(8 * 1024, 0x61) }); // a tool result
      for (let n = 0; n < 100; n++) log.append({ seq: ++seq, bytes: Buffer.from(`{"delta":${n}}`) }); // evict it
    }
    expect(log.slabBytes).toBeLessThanOrEqual(2 * 64 * 1024); // was 16.7 MB and growing with every large frame
  });

  it('lets the slabs of what it held go when it restarts at a later seq (a mirror skipping frames)', () => {
    const log = new ReplayLog({ maxFrames: 10_000, maxBytes: 8 * 1024 * 1024 });
    let seq = 0;
    for (let restart = 0; restart < 20; restart++) {
      for (let n = 0; n < 50; n++) log.append({ seq: ++seq, bytes: Buffer.alloc(100_000, 0x61) });
      seq += 5;
      log.restartAt(seq + 1);
    }
    expect(log.slabBytes).toBeLessThanOrEqual(8 * 1024 * 1024); // was 105 MB after 20 restarts
  });
});

describe('the replay log evicting', () => {
  it('lets an evicted frame go at once, not at its next compaction (it held up to 1,024 of them)', () => {
    const log = new ReplayLog({ maxFrames: 10, maxBytes: 8 * 1024 * 1024 });
    for (let seq = 1; seq <= 500; seq++) log.append({ seq, bytes: Buffer.from(`{"n":${seq}}`) });
    const held = (log as unknown as { entries: unknown[] }).entries.filter((e) => e !== undefined);
    expect(held).toHaveLength(10);
    expect(log.since(log.firstSeq).map((e) => e.seq)).toEqual([491, 492, 493, 494, 495, 496, 497, 498, 499, 500]);
  });
});

describe('the file store with a large frame', () => {
  let dir: TempDir | undefined;
  afterEach(() => dir?.cleanup());

  it('writes its pieces and reads the frame back byte for byte', () => {
    dir = makeTempDir('tether-store-large-');
    const store = new FileSessionStore(dir.path);
    store.create({ id: 'sess-1', agent: 'a', engine: 'demo', owner: 'alice', options: {}, created_at: new Date().toISOString() });
    const frames = [
      encodeLineFrame('sess-1', 1, 'engine', line(120_000)),
      encodeLineFrame('sess-1', 2, 'engine', line(200)),
      encodeLineFrame('sess-1', 3, 'engine', line(70_000, 'é')),
    ];
    frames.forEach((bytes, i) => store.appendFrame('sess-1', { seq: i + 1, agentSeq: i + 1, bytes }));
    store.flush();
    const [restored] = store.loadAll();
    store.close();
    expect(restored.frames.map((f) => f.seq)).toEqual([1, 2, 3]);
    restored.frames.forEach((f, i) => {
      const want = frames[i] instanceof TextPieces ? (frames[i] as TextPieces).joined() : (frames[i] as Buffer);
      expect(Buffer.from(f.bytes as Buffer).equals(want)).toBe(true);
    });
  });
});
