/**
 * Helpers for the "nothing lost, nothing doubled" tests: a recorder that keeps every item a
 * client's session hands out (and counts frames that reached it again on the wire), an
 * engine wrapper that tees the demo engine's stdout to a file (the ground truth of what the
 * engine wrote), and comparisons of views.
 */
import { chmodSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RemoteSession } from '../../client/remote-session.js';
import { demoEnginePath } from '../../agent/engine-command.js';

/** One item as a client's application saw it. `body` is the engine line, or the event as JSON. */
export interface Seen {
  seq: number;
  origin: 'engine' | 'gateway';
  body: string;
}

export interface Recording {
  items: Seen[];
  /** Every seq that reached RemoteSession.onFrame, duplicates included (wire view). */
  wire: number[];
  /** Settles when the session's iteration ends (exited, or failed); never rejects. */
  done: Promise<Error | undefined>;
}

/** Reads `session` to its end in the background. Attach it right after create/attach. */
export function record(session: RemoteSession): Recording {
  const rec: Recording = { items: [], wire: [], done: Promise.resolve(undefined) };
  const onFrame = session.onFrame.bind(session);
  session.onFrame = (f) => {
    rec.wire.push(f.seq);
    onFrame(f);
  };
  rec.done = (async () => {
    try {
      for await (const item of session) {
        if (item.kind === 'engine') rec.items.push({ seq: item.seq, origin: item.origin, body: item.line });
        else if (item.kind === 'event') rec.items.push({ seq: item.seq, origin: 'gateway', body: JSON.stringify(item.event) });
      }
      return undefined;
    } catch (err) {
      return err as Error;
    }
  })();
  return rec;
}

/**
 * Writes an executable engine command into `dir` that runs the demo engine with the agent's
 * arguments and copies its stdout, byte for byte, to `dir/engine-<pid>.ndjson`. Use it as
 * `engine: 'claude', engineCommand` of an Agent.
 */
export function teeEngine(dir: string): string {
  const path = join(dir, 'tee-engine.sh');
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  writeFileSync(path, `#!/bin/sh\n${q(process.execPath)} ${q(demoEnginePath())} "$@" | tee ${q(dir)}/engine-$$.ndjson\n`);
  chmodSync(path, 0o755);
  return path;
}

/** The lines every teed engine in `dir` wrote (one engine expected), without the agent's own initialize answer. */
export function engineOutput(dir: string): string[] {
  const files = readdirSync(dir).filter((f) => f.startsWith('engine-') && f.endsWith('.ndjson'));
  const lines: string[] = [];
  for (const f of files) {
    for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      if (line.includes('"tether_agent_init"') && line.includes('"control_response"')) continue;
      lines.push(line);
    }
  }
  return lines;
}

/** Compares a client's view with the reference view: counts lost, doubled and changed frames. */
export function compareViews(
  reference: Seen[],
  view: Seen[],
): { checked: number; lost: number; duplicated: number; changed: number; gaps: number; outOfOrder: number } {
  const ref = new Map(reference.map((i) => [i.seq, i]));
  const seen = new Map<number, number>();
  let changed = 0;
  let gaps = 0;
  let outOfOrder = 0;
  let last = 0;
  for (const i of view) {
    if (i.seq === 0) {
      gaps++;
      continue;
    }
    if (i.seq <= last) outOfOrder++;
    last = Math.max(last, i.seq);
    seen.set(i.seq, (seen.get(i.seq) ?? 0) + 1);
    const r = ref.get(i.seq);
    if (!r || r.body !== i.body || r.origin !== i.origin) changed++;
  }
  let lost = 0;
  for (const s of ref.keys()) if (!seen.has(s)) lost++;
  let duplicated = 0;
  for (const n of seen.values()) duplicated += n - 1;
  return { checked: view.length, lost, duplicated, changed, gaps, outOfOrder };
}
