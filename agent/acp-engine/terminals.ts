import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as acp from '@agentclientprotocol/sdk';
import type { SessionFolder } from './session-folder.js';

/** Output a terminal keeps when the engine names no limit (its tail, as ACP asks). */
export const DEFAULT_TERMINAL_OUTPUT_BYTES = 1024 * 1024;
/** Most terminals one engine may hold at once. */
export const MAX_TERMINALS = 16;

interface Terminal {
  child: ChildProcess;
  output: Buffer;
  truncated: boolean;
  limit: number;
  exit: Promise<acp.TerminalExitStatus>;
  status?: acp.TerminalExitStatus;
}

/**
 * The engine's `terminal/*` requests: commands run in the session folder (or a folder inside
 * it), each in its own process group, judged by the gateway's policy as a Bash call first.
 * Output is kept up to the engine's byte limit (its tail). `closeAll` kills what is left when
 * the engine process ends.
 */
export class Terminals {
  private readonly live = new Map<string, Terminal>();

  constructor(
    private readonly folder: SessionFolder,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  async create(p: acp.CreateTerminalRequest): Promise<acp.CreateTerminalResponse> {
    if (this.live.size >= MAX_TERMINALS) throw acp.RequestError.invalidRequest(undefined, `at most ${MAX_TERMINALS} terminals at once`);
    const cwd = this.folder.inside(p.cwd ?? this.folder.cwd);
    const line = [p.command, ...(p.args ?? [])].join(' ');
    await this.folder.judge('Bash', { command: line });
    const env = { ...this.env, ...Object.fromEntries((p.env ?? []).map((e) => [e.name, e.value])) };
    // No args: the command is a shell line (what agents send for a Bash tool).
    const child = p.args?.length
      ? spawn(p.command, p.args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(p.command, { cwd, env, detached: true, shell: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const t: Terminal = {
      child,
      output: Buffer.alloc(0),
      truncated: false,
      limit: p.outputByteLimit ?? DEFAULT_TERMINAL_OUTPUT_BYTES,
      exit: new Promise((resolve) => {
        child.on('error', (err) => {
          t.output = Buffer.concat([t.output, Buffer.from(`${err.message}\n`)]);
          resolve((t.status = { exitCode: 127, signal: null }));
        });
        child.on('close', (code, signal) => resolve((t.status = { exitCode: code, signal })));
      }),
    };
    const keep = (chunk: Buffer) => {
      const all = Buffer.concat([t.output, chunk]);
      if (all.length > t.limit) t.truncated = true;
      t.output = all.length > t.limit ? all.subarray(all.length - t.limit) : all;
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const terminalId = `term_${randomUUID()}`;
    this.live.set(terminalId, t);
    return { terminalId };
  }

  output(p: acp.TerminalOutputRequest): acp.TerminalOutputResponse {
    const t = this.get(p.terminalId);
    return { output: t.output.toString('utf8'), truncated: t.truncated, exitStatus: t.status ?? null };
  }

  waitForExit(p: acp.WaitForTerminalExitRequest): Promise<acp.WaitForTerminalExitResponse> {
    return this.get(p.terminalId).exit;
  }

  kill(p: acp.KillTerminalRequest): acp.KillTerminalResponse {
    killGroup(this.get(p.terminalId));
    return {};
  }

  release(p: acp.ReleaseTerminalRequest): acp.ReleaseTerminalResponse {
    const t = this.get(p.terminalId);
    killGroup(t);
    this.live.delete(p.terminalId);
    return {};
  }

  /** Kills every terminal's process group (the engine process is ending). */
  closeAll(): void {
    for (const t of this.live.values()) killGroup(t);
    this.live.clear();
  }

  private get(id: string): Terminal {
    const t = this.live.get(id);
    if (!t) throw acp.RequestError.invalidParams(undefined, `no terminal ${id}`);
    return t;
  }
}

function killGroup(t: Terminal): void {
  if (t.status || t.child.pid === undefined) return;
  try {
    process.kill(-t.child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
