import { mkdirSync, readFileSync, renameSync, unwatchFile, watchFile, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { TetherError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/logging.js';

/** The revocation list's file name inside the state folder. */
export const REVOCATIONS_FILE = 'revoked.json';
/** How often the gateway looks at the file (a stat): revocations reach live connections within this, plus a scan. */
export const REVOCATION_POLL_MS = 250;
/** Entries kept at most; `tether revoke` refuses more. */
export const MAX_REVOCATIONS = 100_000;

/**
 * One revocation. `jti`: that one token. `sub`: every token of that subject issued at or
 * before `at` (a token minted afterwards for the same subject is accepted: revoking by
 * subject is how a key holder cuts a person or machine off and re-issues).
 */
export const Revocation = z
  .object({
    jti: z.string().min(1).max(256).optional(),
    sub: z.string().min(1).max(256).optional(),
    /** When it was revoked (ISO 8601). */
    at: z.string().datetime(),
    reason: z.string().max(256).optional(),
  })
  .refine((r) => (r.jti === undefined) !== (r.sub === undefined), 'exactly one of jti and sub');
export type Revocation = z.infer<typeof Revocation>;

const RevocationFile = z.object({ revoked: z.array(Revocation).max(MAX_REVOCATIONS) });

/** What a revocation is checked against: a verified token's claims. */
export interface TokenClaims {
  sub: string;
  jti: string;
  issuedAt: Date;
}

/** Reads a revocation file; a missing file is an empty list. Throws INVALID_ARGUMENT when it cannot be read or parsed. */
export function readRevocations(path: string): Revocation[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new TetherError('INVALID_ARGUMENT', `cannot read ${path}: ${(err as Error).message}`);
  }
  let parsed: z.ZodSafeParseResult<z.infer<typeof RevocationFile>>;
  try {
    parsed = RevocationFile.safeParse(JSON.parse(text));
  } catch {
    throw new TetherError('INVALID_ARGUMENT', `${path} is not JSON`);
  }
  if (!parsed.success) throw new TetherError('INVALID_ARGUMENT', `${path} is not a revocation list: ${parsed.error.issues[0]?.message}`);
  return parsed.data.revoked;
}

/**
 * Adds a revocation to STATE_DIR/revoked.json (created with mode 0600, replaced atomically),
 * unless the same one is there already. Returns the entry. A running gateway over the same
 * state folder picks it up within {@link REVOCATION_POLL_MS}.
 */
export function addRevocation(stateDir: string, r: { jti?: string; sub?: string; reason?: string }, now = new Date()): Revocation {
  const path = join(stateDir, REVOCATIONS_FILE);
  const parsed = Revocation.safeParse({ ...r, at: now.toISOString() });
  if (!parsed.success) throw new TetherError('INVALID_ARGUMENT', `not a revocation: ${parsed.error.issues[0]?.message}`);
  const entry = parsed.data;
  const list = readRevocations(path);
  if (entry.jti !== undefined && list.some((e) => e.jti === entry.jti)) return list.find((e) => e.jti === entry.jti)!;
  if (list.length >= MAX_REVOCATIONS) throw new TetherError('RESOURCE_EXHAUSTED', `${path} holds ${MAX_REVOCATIONS} revocations already`);
  list.push(entry);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  writeFileSync(`${path}.tmp`, JSON.stringify({ revoked: list }, null, 1) + '\n', { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
  return entry;
}

/**
 * The gateway's view of STATE_DIR/revoked.json: loaded at start (a file that cannot be read
 * stops the gateway: fail closed), then watched (a stat every {@link REVOCATION_POLL_MS});
 * each change calls the listeners, which close matching live connections. A file that turns
 * unreadable later keeps the last good list and logs an error.
 */
export class RevocationList {
  private byJti = new Map<string, Revocation>();
  private bySub = new Map<string, Revocation>();
  /** The file's revocations as last read (what a cluster publishes). */
  private file: Revocation[] = [];
  /** Revocations of the cluster (other gateways'), by their key in its store. */
  private readonly shared = new Map<string, Revocation>();
  private readonly listeners = new Set<() => void>();
  private readonly log: Logger;
  private readonly onStat = () => this.reload();
  private watching = false;

  constructor(
    readonly path: string,
    opts: { logger?: Logger; pollMs?: number } = {},
  ) {
    this.log = opts.logger ?? silentLogger;
    this.load(readRevocations(path));
    watchFile(path, { interval: opts.pollMs ?? REVOCATION_POLL_MS, persistent: false }, this.onStat);
    this.watching = true;
  }

  /** The list kept in a state folder. */
  static inStateDir(stateDir: string, opts: { logger?: Logger; pollMs?: number } = {}): RevocationList {
    return new RevocationList(join(stateDir, REVOCATIONS_FILE), opts);
  }

  /** The revocations read from the file. */
  get fromFile(): readonly Revocation[] {
    return this.file;
  }

  /**
   * Adds a revocation of the cluster (made on another gateway); the listeners hear it when it
   * is new. Kept until the gateway stops: the file never lifts it.
   */
  addShared(r: Revocation): void {
    const key = r.jti !== undefined ? `jti:${r.jti}` : `sub:${r.sub}:${r.at}`;
    if (this.shared.has(key)) return;
    this.shared.set(key, r);
    index(this.byJti, this.bySub, r); // not a rebuild: a cluster's whole list arrives one by one at start
    for (const fn of this.listeners) fn();
  }

  /** How many revocations are in force. */
  get size(): number {
    return this.byJti.size + this.bySub.size;
  }

  /** The revocation that covers a token, if any. */
  match(t: TokenClaims): Revocation | undefined {
    const byJti = this.byJti.get(t.jti);
    if (byJti) return byJti;
    const bySub = this.bySub.get(t.sub);
    // iat has whole seconds: a token issued in the second of the revocation is covered too.
    if (bySub && t.issuedAt.getTime() <= Math.floor(Date.parse(bySub.at) / 1000) * 1000 + 999) return bySub;
    return undefined;
  }

  /** Calls `fn` after every change of the list. Returns the function that stops it. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Re-reads the file now (the watcher does this by itself). */
  reload(): void {
    try {
      this.load(readRevocations(this.path));
    } catch (err) {
      this.log.error({ err: (err as Error).message }, 'revocation list unreadable; keeping the last good one');
      return;
    }
    for (const fn of this.listeners) fn();
  }

  /** Stops watching the file. Idempotent. */
  close(): void {
    if (this.watching) unwatchFile(this.path, this.onStat);
    this.watching = false;
    this.listeners.clear();
  }

  private load(list: Revocation[]): void {
    this.file = list;
    const byJti = new Map<string, Revocation>();
    const bySub = new Map<string, Revocation>();
    for (const r of list) index(byJti, bySub, r);
    for (const r of this.shared.values()) index(byJti, bySub, r);
    this.byJti = byJti;
    this.bySub = bySub;
  }
}

/** Files a revocation under its jti, or its subject when it is that subject's latest. */
function index(byJti: Map<string, Revocation>, bySub: Map<string, Revocation>, r: Revocation): void {
  if (r.jti !== undefined) byJti.set(r.jti, r);
  else if (r.sub !== undefined) {
    const prev = bySub.get(r.sub);
    if (!prev || Date.parse(r.at) > Date.parse(prev.at)) bySub.set(r.sub, r); // the latest covers the earlier ones
  }
}
