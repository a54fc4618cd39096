/**
 * Programs some test files need besides Node: Debian's chromium (the web page's tests) and
 * nats-server (the cluster's). .ci/run installs both. Where one is missing, the files that need
 * it skip (describe.skipIf(!hasTool(...))) and test/support/global-tools.ts prints one line
 * saying what to install; under CI (CI=true) a missing one fails the run instead, so CI never
 * skips silently.
 */
import { existsSync } from 'node:fs';

export type ToolName = 'chromium' | 'nats-server';

interface Tool {
  /** The variable naming another path to the program. */
  env: string;
  /** Where else to look, after the variable (and, for a PATH name, PATH). */
  paths: string[];
  /** Looked up on PATH under this name. */
  onPath?: string;
  install: string;
}

const TOOLS: Record<ToolName, Tool> = {
  chromium: {
    env: 'TETHER_TEST_CHROMIUM',
    paths: ['/usr/bin/chromium'],
    install: "install Debian's chromium: apt-get install chromium (or set TETHER_TEST_CHROMIUM to a Chromium)",
  },
  'nats-server': {
    env: 'TETHER_TEST_NATS_SERVER',
    onPath: 'nats-server',
    paths: ['/usr/sbin/nats-server'],
    install: 'install nats-server: apt-get install nats-server (or set TETHER_TEST_NATS_SERVER)',
  },
};

/** Where the program is, or undefined. A path in the tool's variable is the only place looked at. */
export function toolPath(name: ToolName, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const tool = TOOLS[name];
  const given = env[tool.env];
  if (given) return existsSync(given) ? given : undefined;
  const onPath = tool.onPath
    ? (env.PATH ?? '')
        .split(':')
        .filter(Boolean)
        .map((dir) => `${dir}/${tool.onPath}`)
    : [];
  return [...onPath, ...tool.paths].find((p) => existsSync(p));
}

export function hasTool(name: ToolName): boolean {
  return toolPath(name) !== undefined;
}

/** The one line for a missing tool: what needs it and what to install. */
export function missingToolLine(name: ToolName): string {
  return `${name} not found: the tests that need it are skipped; ${TOOLS[name].install}`;
}

export const TOOL_NAMES = Object.keys(TOOLS) as ToolName[];
