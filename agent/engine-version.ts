import { execFile } from 'node:child_process';
import type { EngineKind } from '../core/protocol/session-options.js';
import { DEMO_VERSION } from './demo-engine/frames.js';
import type { ResolvedEngines } from './engine-command.js';

/** Bound on `claude --version` at agent start. */
export const ENGINE_VERSION_TIMEOUT_MS = 10_000;

/**
 * What each engine answers to `--version`, exactly as it prints it (the CLI's own format,
 * e.g. `2.1.332 (Claude Code)`), learned once at agent start. An engine whose probe fails is
 * left out (the agent still runs it; `tether-claude -v` then says the version is unknown).
 */
export async function probeEngineVersions(engines: ResolvedEngines, env: NodeJS.ProcessEnv): Promise<Partial<Record<EngineKind, string>>> {
  const out: Partial<Record<EngineKind, string>> = {};
  if (engines.engines.includes('demo')) out.demo = `${DEMO_VERSION} (Tether demo engine)`;
  if (engines.claudeCommand) {
    const v = await versionOf(engines.claudeCommand, env);
    if (v) out.claude = v;
  }
  return out;
}

function versionOf(command: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = execFile(command, ['--version'], { env, timeout: ENGINE_VERSION_TIMEOUT_MS, maxBuffer: 64 * 1024 }, (err, stdout) => {
      const line = String(stdout ?? '')
        .split('\n')[0]
        ?.trim();
      resolve(!err && line ? line.slice(0, 256) : undefined);
    });
    child.stdin?.end(); // an engine that reads stdin instead of answering sees EOF at once
  });
}
