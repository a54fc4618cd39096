import { execFile } from 'node:child_process';
import { TetherError } from '../../core/errors.js';

/**
 * Runs git for the folder view, and only here: a fixed argument list through execFile (never a
 * shell), a bounded time and output, and nothing of the repository's configuration that would
 * start a program. What a client names reaches git only after `--end-of-options` or `--`, and
 * only once core/protocol/folder-view.ts checked it.
 */

/** How long one git call may take, and how much it may print, before it is killed. */
export const GIT_TIMEOUT_MS = 10_000;
export const GIT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

/**
 * Settings that make git run a program, overridden on every call (command-line `-c` wins over
 * the repository's `.git/config`): the pager, an external diff, hooks, the fsmonitor daemon,
 * signature checks (gpg), submodule summaries, automatic maintenance.
 */
const FIXED_CONFIG = [
  'core.pager=cat',
  'diff.external=',
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.untrackedCache=false',
  'log.showSignature=false',
  'status.submoduleSummary=false',
  'diff.submodule=short',
  'gc.auto=0',
  'maintenance.auto=false',
  'core.quotePath=false',
];

/** `filter.<name>.<key>` in any configuration git reads: each such filter driver is switched off for the call. */
const FILTER_KEY = /^filter\.(.+)\.(clean|smudge|process|required)$/;

/** The environment git runs in: no system config, no prompts, no optional locks, nothing from outside that redirects it. */
function gitEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_LITERAL_PATHSPECS: '1',
    GIT_NO_REPLACE_OBJECTS: '1',
  };
  if (process.env.HOME) env.HOME = process.env.HOME; // the owner's global config (excludes, identity); it names no repository
  return env;
}

export interface GitOutput {
  stdout: string;
  /** git's exit code (0, or 1 for `diff --no-index` with differences). */
  code: number;
}

/** One git run in `cwd` with `args` after the fixed options; rejects with a TetherError saying why it failed. */
export function runGit(cwd: string, args: readonly string[], extraConfig: readonly string[] = [], okCodes = [0]): Promise<GitOutput> {
  const argv = [...[...FIXED_CONFIG, ...extraConfig].flatMap((c) => ['-c', c]), '--no-pager', ...args];
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      argv,
      { cwd, env: gitEnv(), timeout: GIT_TIMEOUT_MS, maxBuffer: GIT_MAX_OUTPUT_BYTES, encoding: 'utf8', killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as NodeJS.ErrnoException).code === 'number' ? Number((err as NodeJS.ErrnoException).code) : -1) : 0;
        if (!err || okCodes.includes(code)) return resolve({ stdout, code });
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        if (e.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER')
          return reject(new TetherError('RESOURCE_EXHAUSTED', `git printed more than ${GIT_MAX_OUTPUT_BYTES} bytes`));
        if (e.killed) return reject(new TetherError('DEADLINE_EXCEEDED', `git took longer than ${GIT_TIMEOUT_MS} ms`));
        if (e.code === 'ENOENT') return reject(new TetherError('FAILED_PRECONDITION', 'git is not installed on the agent'));
        const said = String(stderr).trim().split('\n').slice(-3).join(' ').slice(0, 400);
        reject(new TetherError('FAILED_PRECONDITION', `git ${args[0]} failed: ${said || `exit ${code}`}`));
      },
    );
  });
}

/**
 * Git for one folder: learns once per call which filter drivers the configuration defines
 * (`git config` runs none) and switches each off, so a `.gitattributes` naming one runs nothing.
 */
export async function gitIn(cwd: string): Promise<(args: readonly string[], okCodes?: number[]) => Promise<GitOutput>> {
  const listed = await runGit(cwd, ['config', '--list', '--name-only', '-z'], [], [0, 1]);
  const filters = new Set<string>();
  for (const key of listed.stdout.split('\0')) {
    const m = FILTER_KEY.exec(key);
    if (!m) continue;
    // `-c` splits at the first '=': a driver whose name holds one could not be switched off.
    if (/[=\n]/.test(m[1])) throw new TetherError('FAILED_PRECONDITION', 'the repository defines a filter whose name holds "=": not read');
    filters.add(m[1]);
  }
  const off = [...filters].flatMap((f) => [
    `filter.${f}.clean=`,
    `filter.${f}.smudge=`,
    `filter.${f}.process=`,
    `filter.${f}.required=false`,
  ]);
  return (args, okCodes) => runGit(cwd, args, off, okCodes);
}
