import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
  writevSync,
} from 'node:fs';
import { join } from 'node:path';
import type { SessionOptions, EngineKind } from '../../core/protocol/session-options.js';
import type { RoleDecisions } from './session-roles.js';
import { REPLAY_DEFAULTS } from './history/replay-log.js';
import { TextPieces } from '../../core/wire/text-pieces.js';
import type { FrameBytes } from '../../core/wire/session-frame.js';

/** What a session is, apart from its history. */
export interface SessionRecord {
  id: string;
  agent: string;
  engine: EngineKind;
  owner: string;
  options: SessionOptions;
  created_at: string;
}

/** One history frame as stored: the gateway seq, the agent seq it came from, the frame's bytes. */
export interface StoredFrame {
  seq: number;
  agentSeq?: number;
  /**
   * The `session.frame` notification exactly as clients receive it (UTF-8 JSON); appended
   * large frames come in pieces, frames read back are one Buffer.
   */
  bytes: FrameBytes;
}

export interface StoredInput {
  seq: number;
  key: string;
  line: Record<string, unknown>;
}

/** A session as read back after a restart. */
export interface StoredSession {
  record: SessionRecord;
  frames: StoredFrame[];
  inputs: StoredInput[];
  /** The owner's role decisions by principal (see SessionRoles). */
  roles: RoleDecisions;
}

/**
 * Where sessions and their history live so they survive a gateway restart. Frames may be
 * held briefly and written in a burst (group commit); inputs are written at once. When what
 * was appended may be acked or shown is asked only through the session's Durability
 * (`durability.ts`), which reads `whenWritten` (and `whenShowable`). Behind this interface so
 * a distributed backend (NATS JetStream) can replace the embedded one.
 */
export interface SessionStore {
  readonly kind: string;
  /** Whether the store can take writes now (false once closed, or when its storage is gone); /readyz checks it. */
  readonly isOpen: boolean;
  create(record: SessionRecord): void;
  appendFrame(sessionId: string, frame: StoredFrame): void;
  appendInput(sessionId: string, input: StoredInput): void;
  /**
   * Runs `done` once everything appended so far is written (a `kill -9` keeps it): at once
   * when nothing is held, else when the store's own write of it is confirmed (the file
   * store's group commit, at the latest at the end of this turn; JetStream's acknowledgement).
   */
  whenWritten(done: () => void): void;
  /**
   * Runs `done` once what was appended so far may be shown though not yet written; absent:
   * only once written. The cluster's store says yes early while NATS is briefly away (bounded),
   * so the gateway keeps serving its own sessions.
   */
  whenShowable?(done: () => void): void;
  /** Replaces the session's role decisions (the whole set, written before it returns). */
  saveRoles(sessionId: string, roles: RoleDecisions): void;
  drop(sessionId: string): void;
  loadAll(): StoredSession[];
  close(): void;
}

/** No persistence: sessions live as long as the process. */
export class MemorySessionStore implements SessionStore {
  readonly kind = 'memory';
  private closed = false;
  get isOpen(): boolean {
    return !this.closed;
  }
  create(): void {}
  appendFrame(): void {}
  appendInput(): void {}
  /** Keeps nothing, so there is nothing to wait for. */
  whenWritten(done: () => void): void {
    done();
  }
  saveRoles(): void {}
  drop(): void {}
  loadAll(): StoredSession[] {
    return [];
  }
  close(): void {
    this.closed = true;
  }
}

/**
 * A frame's log record: `{"f":SEQ,"a":AGENT_SEQ,"m":FRAME}` and a newline, the frame's bytes
 * embedded as they are (they are JSON), so storing a frame never escapes it.
 */
export function frameRecord(frame: StoredFrame): Buffer {
  return Buffer.concat(frameRecordPieces(frame));
}

/** {@link frameRecord} as pieces to write with writev: the frame's own bytes are not copied. */
function frameRecordPieces(frame: StoredFrame): Uint8Array[] {
  const head = Buffer.from(`{"f":${frame.seq},"a":${frame.agentSeq ?? 0},"m":`);
  return frame.bytes instanceof TextPieces ? [head, ...frame.bytes.pieces, RECORD_END] : [head, frame.bytes, RECORD_END];
}
const RECORD_END = Buffer.from('}\n');

/** Frame bytes held for one group commit before it is written regardless. */
const GROUP_COMMIT_MAX_BYTES = 1024 * 1024;
const RECORD_HEAD = /^\{"f":\d+,"a":\d+,"m":/;

/** The frame's bytes sliced back out of a record that parsed as JSON; undefined for another layout. */
function frameOfRecord(line: string): Buffer | undefined {
  const head = RECORD_HEAD.exec(line);
  return head ? Buffer.from(line.slice(head[0].length, -1)) : undefined;
}

/** Bytes of one session's log on disk before it is compacted, unless told otherwise. */
const DEFAULT_MAX_LOG_BYTES = 64 * 1024 * 1024;

/** Inputs kept per session on load (the agent's hello says which were already applied). */
export const INPUTS_KEPT = 1024;

/** An input's log record: `{"i":SEQ,"k":KEY,"l":LINE}` and a newline. */
export function inputRecord(input: StoredInput): string {
  return JSON.stringify({ i: input.seq, k: input.key, l: input.line }) + '\n';
}

/**
 * Reads one log line (a frame or input record) back; undefined for a torn or foreign line (a
 * crash mid-write leaves a torn last line: the agent still holds that frame).
 */
export function readLogRecord(line: string): { frame: StoredFrame } | { input: StoredInput } | undefined {
  if (!line) return undefined;
  let v: { f?: number; a?: number; m?: unknown; i?: number; k?: string; l?: Record<string, unknown> };
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  const frame = v.f !== undefined && v.m !== undefined ? frameOfRecord(line) : undefined;
  if (frame) return { frame: { seq: v.f!, agentSeq: v.a, bytes: frame } };
  if (v.i !== undefined && v.k !== undefined && v.l) return { input: { seq: v.i, key: v.k, line: v.l } };
  return undefined;
}

/**
 * The embedded store: one folder per session under `dir`, with `session.json` and an
 * append-only `log.ndjson` of frames and inputs. Read back whole on start; the replay log
 * keeps only its bounded tail in memory.
 */
export class FileSessionStore implements SessionStore {
  readonly kind = 'file';
  private readonly fds = new Map<string, number>();
  /** Bytes in each open session log, to know when to compact it. */
  private readonly bytes = new Map<string, number>();
  private closed = false;
  private readonly maxLogBytes: number;
  private readonly keepFrames: number;
  /** Frame records held for the next group commit, per session, in order, as pieces. */
  private held = new Map<string, Uint8Array[]>();
  private heldBytes = 0;
  private flushScheduled = false;
  /** Callbacks waiting for the frames held now to be written. */
  private waiters: (() => void)[] = [];

  /**
   * `maxLogBytes` (default 64 MiB) bounds each session's log on disk: past it the log is
   * compacted to its newest `keepFrames` frames (default 10,000, the replay history's own
   * bound) and inputs.
   */
  constructor(
    readonly dir: string,
    opts: { maxLogBytes?: number; keepFrames?: number } = {},
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.maxLogBytes = opts.maxLogBytes ?? DEFAULT_MAX_LOG_BYTES;
    this.keepFrames = opts.keepFrames ?? REPLAY_DEFAULTS.maxFrames;
  }

  /** Open from construction until close(), while its folder exists. */
  get isOpen(): boolean {
    return !this.closed && existsSync(this.dir);
  }

  private folder(id: string): string {
    if (!/^[A-Za-z0-9-]+$/.test(id)) throw new Error(`bad session id for the store: ${id}`);
    return join(this.dir, id);
  }

  private fd(id: string): number {
    let fd = this.fds.get(id);
    if (fd === undefined) {
      const log = join(this.folder(id), 'log.ndjson');
      fd = openSync(log, 'a', 0o600);
      this.fds.set(id, fd);
      if (!this.bytes.has(id)) this.bytes.set(id, statSync(log).size);
    }
    return fd;
  }

  /** Appends one record; compacts the log first when it has grown past its bound. */
  private append(id: string, record: string | Buffer): void {
    const length = typeof record === 'string' ? Buffer.byteLength(record) : record.length;
    const size = (this.bytes.get(id) ?? 0) + length;
    if (size > this.maxLogBytes && this.fds.has(id)) this.compact(id);
    if (typeof record === 'string') writeSync(this.fd(id), record);
    else writeSync(this.fd(id), record);
    this.bytes.set(id, (this.bytes.get(id) ?? 0) + length);
  }

  create(record: SessionRecord): void {
    const folder = this.folder(record.id);
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    writeFileSync(join(folder, 'session.json'), JSON.stringify(record), { mode: 0o600 });
  }

  /**
   * Holds the frame's record for a group commit: written with the others of its burst at the
   * end of this turn of the event loop, or once 1 MiB is held, whichever comes first (acks to
   * the agent and showing wait for it through whenWritten).
   */
  appendFrame(sessionId: string, frame: StoredFrame): void {
    if (this.closed) return;
    // A large frame's record is written as its pieces (writev), a small one's as one Buffer.
    const record = frame.bytes instanceof TextPieces ? frameRecordPieces(frame) : [frameRecord(frame)];
    const list = this.held.get(sessionId);
    if (list) list.push(...record);
    else this.held.set(sessionId, record);
    for (const piece of record) this.heldBytes += piece.byteLength;
    if (this.heldBytes >= GROUP_COMMIT_MAX_BYTES) this.flush();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  appendInput(sessionId: string, input: StoredInput): void {
    this.flush(); // the log keeps the gateway's order
    this.append(sessionId, inputRecord(input));
  }

  whenWritten(done: () => void): void {
    if (this.heldBytes) this.waiters.push(done);
    else done();
  }

  /** One write per session of everything held (writev: no copy into one buffer), then the waiters. */
  flush(): void {
    this.flushScheduled = false;
    if (this.heldBytes) this.writeHeld();
    const waiters = this.waiters;
    this.waiters = [];
    for (const done of waiters) done();
  }

  private writeHeld(): void {
    const held = this.held;
    this.held = new Map();
    this.heldBytes = 0;
    for (const [id, records] of held) {
      if (!this.fds.has(id) && !existsSync(join(this.dir, id))) continue; // dropped meanwhile
      const bytes = records.reduce((n, r) => n + r.byteLength, 0);
      if ((this.bytes.get(id) ?? 0) + bytes > this.maxLogBytes && this.fds.has(id)) this.compact(id);
      const fd = this.fd(id);
      let written = 0;
      while (written < bytes) written += writevSync(fd, written ? [Buffer.concat(records).subarray(written)] : records);
      this.bytes.set(id, (this.bytes.get(id) ?? 0) + bytes);
    }
  }

  /** Written to a new file, then renamed over `roles.json`: a crash leaves the old set or the new one. */
  saveRoles(sessionId: string, roles: RoleDecisions): void {
    const file = join(this.folder(sessionId), 'roles.json');
    writeFileSync(file + '.tmp', JSON.stringify(roles), { mode: 0o600 });
    renameSync(file + '.tmp', file);
  }

  drop(sessionId: string): void {
    this.held.delete(sessionId);
    const fd = this.fds.get(sessionId);
    if (fd !== undefined) closeSync(fd);
    this.fds.delete(sessionId);
    this.bytes.delete(sessionId);
    rmSync(this.folder(sessionId), { recursive: true, force: true });
  }

  loadAll(): StoredSession[] {
    const out: StoredSession[] = [];
    for (const id of readdirSync(this.dir)) {
      if (!existsSync(join(this.dir, id, 'session.json'))) continue;
      try {
        out.push(this.read(id));
      } catch {
        // unreadable session folder: skip it rather than refuse to start
      }
    }
    return out;
  }

  /** One session folder read back: its record, frames, and its newest inputs. */
  private read(id: string): StoredSession {
    const folder = this.folder(id);
    const record = JSON.parse(readFileSync(join(folder, 'session.json'), 'utf8')) as SessionRecord;
    const frames: StoredFrame[] = [];
    const inputs: StoredInput[] = [];
    const log = join(folder, 'log.ndjson');
    const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
    for (const line of text.split('\n')) {
      const r = readLogRecord(line);
      if (r && 'frame' in r) frames.push(r.frame);
      else if (r) inputs.push(r.input);
    }
    const rolesFile = join(folder, 'roles.json');
    const roles = existsSync(rolesFile) ? (JSON.parse(readFileSync(rolesFile, 'utf8')) as RoleDecisions) : {};
    return { record, frames, inputs: inputs.slice(-INPUTS_KEPT), roles };
  }

  /**
   * Rewrites a session's log with only its newest `keepFrames` frames and inputs, so the file
   * stays bounded like the in-memory history (older frames are gone for resumes anyway: a
   * client asking for them gets a gap). Written to a new file, then renamed over the old one.
   */
  private compact(id: string): void {
    const { frames, inputs } = this.read(id); // frames held for a commit are not in it yet: they are appended after
    const log = join(this.folder(id), 'log.ndjson');
    const lines = [...frames.slice(-this.keepFrames).map(frameRecord), ...inputs.map(inputRecord)];
    const body = Buffer.concat(lines.map((l) => (typeof l === 'string' ? Buffer.from(l) : l)));
    writeFileSync(log + '.tmp', body, { mode: 0o600 });
    const fd = this.fds.get(id);
    if (fd !== undefined) closeSync(fd);
    this.fds.delete(id);
    renameSync(log + '.tmp', log);
    this.bytes.set(id, body.length);
  }

  close(): void {
    this.flush();
    this.closed = true;
    for (const fd of this.fds.values()) closeSync(fd);
    this.fds.clear();
  }
}
