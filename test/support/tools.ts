/**
 * Programs some test files need besides Node: Debian's chromium (the web page's tests),
 * nats-server (the cluster's) and OpenCode's binary (an ACP agent as an engine: the registry's
 * `opencode-ai` lists a package for every platform, which this registry does not all serve, so
 * npm cannot lock it; the one for this platform is installed apart). .ci/run installs all three. Where one is missing, the files that need
 * it skip (describe.skipIf(!hasTool(...))) and test/support/global-tools.ts prints one line
 * saying what to install; under CI (CI=true) a missing one fails the run instead, so CI never
 * skips silently.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const NODE_MODULES = fileURLToPath(new URL('../../node_modules/', import.meta.url));
/** OpenCode's binary package for this machine (opencode-ai's own choice of name). */
export const OPENCODE_PACKAGE = `opencode-${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
/** The OpenCode version the tests are written against. */
export const OPENCODE_VERSION = '1.18.33';

export type ToolName = 'chromium' | 'nats-server' | 'opencode';

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
  opencode: {
    env: 'TETHER_TEST_OPENCODE',
    paths: [`${NODE_MODULES}${OPENCODE_PACKAGE}/bin/opencode`],
    install: `install OpenCode's binary: npm install --no-save --ignore-scripts ${OPENCODE_PACKAGE}@${OPENCODE_VERSION} (or set TETHER_TEST_OPENCODE)`,
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
