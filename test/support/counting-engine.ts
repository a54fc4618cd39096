/**
 * Engine launchers that leave a trace: a shell wrapper records each engine's pid in a file
 * (one line per spawn) and then execs the real engine under that same pid, so a test can
 * count how many engines an agent started and check that none is left running. The agent's
 * `--version` probe passes through uncounted.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CountingEngine {
  /** The executable to give the agent as its engine command. */
  command: string;
  /** Pids of every engine started so far, oldest first. */
  pids(): number[];
  /** Pids of those still alive (not zombies). */
  alive(): number[];
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Wraps `argv` (executable and leading arguments; the agent's own arguments follow). With
 * `delayS`, each start waits that long before the engine runs (a slow spawn to cut into).
 */
export function countingEngine(dir: string, argv: string[], opts: { delayS?: number } = {}): CountingEngine {
  const log = join(dir, 'engine-pids');
  const command = join(dir, 'counting-engine.sh');
  const delay = opts.delayS ? `sleep ${opts.delayS}\n` : '';
  // The agent's version probe (`--version`, once at start) is not an engine: not counted.
  const exec = `exec ${argv.map(q).join(' ')} "$@"`;
  writeFileSync(command, `#!/bin/sh\nif [ "$1" = "--version" ]; then ${exec}; fi\necho $$ >> ${q(log)}\n${delay}${exec}\n`);
  chmodSync(command, 0o755);
  const pids = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map(Number) : []);
  return { command, pids, alive: () => pids().filter(isAlive) };
}

/** Whether a process exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.split(') ')[1]?.startsWith('Z');
  } catch {
    return false;
  }
}
