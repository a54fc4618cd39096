import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { dirname, isAbsolute, sep } from 'node:path';
import * as acp from '@agentclientprotocol/sdk';
import { realPath } from '../policy-paths.js';

/** Largest file the engine may read through the agent (fs/read_text_file): past it the read is refused, not cut. */
export const MAX_READ_BYTES = 16 * 1024 * 1024;

/** Asks the gateway's policy about one call (the PreToolUse hook); `deny` carries its reason. */
export type PolicyCheck = (
  tool: string,
  input: Record<string, unknown>,
  toolUseId?: string,
) => Promise<{ decision: 'allow' | 'deny' | 'ask' | 'none'; reason?: string }>;

/**
 * The engine's file requests (`fs/read_text_file`, `fs/write_text_file`), answered inside the
 * session folder only: a path is judged with symlinks followed (agent/policy-paths.ts), so a
 * link inside the folder that leads out is refused too, and the gateway's policy judges the
 * call as a Read or Write of that path before it happens.
 */
export class SessionFolder {
  private readonly root: string;

  constructor(
    readonly cwd: string,
    private readonly policy: PolicyCheck,
  ) {
    this.root = realPath(cwd);
  }

  /** The path, refused (RequestError invalid params) unless absolute and inside the session folder. */
  inside(path: string): string {
    if (!isAbsolute(path)) throw acp.RequestError.invalidParams(undefined, `path ${path} is not absolute`);
    const real = realPath(path);
    if (real !== this.root && !real.startsWith(this.root.endsWith(sep) ? this.root : this.root + sep))
      throw acp.RequestError.invalidParams(undefined, `path ${path} is outside the session folder ${this.cwd}`);
    return real;
  }

  async read(p: acp.ReadTextFileRequest): Promise<acp.ReadTextFileResponse> {
    const path = this.inside(p.path);
    await this.judge('Read', { file_path: p.path });
    const bytes = await readFile(path);
    if (bytes.length > MAX_READ_BYTES)
      throw acp.RequestError.invalidParams(undefined, `${p.path} is ${bytes.length} bytes, over ${MAX_READ_BYTES}`);
    const text = bytes.toString('utf8');
    if (p.line === undefined && p.limit === undefined) return { content: text };
    const lines = text.split('\n');
    const from = Math.max(0, (p.line ?? 1) - 1);
    return { content: lines.slice(from, p.limit === undefined || p.limit === null ? undefined : from + p.limit).join('\n') };
  }

  async write(p: acp.WriteTextFileRequest): Promise<acp.WriteTextFileResponse> {
    const path = this.inside(p.path);
    await this.judge('Write', { file_path: p.path, content: p.content });
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, p.content);
    return {};
  }

  /** Refuses the request when the policy denies the call (ask and allow: the engine already asked, or needs not). */
  async judge(tool: string, input: Record<string, unknown>): Promise<void> {
    const d = await this.policy(tool, input);
    if (d.decision === 'deny') throw new acp.RequestError(-32000, d.reason ?? `Tether policy denies ${tool}`);
  }
}
