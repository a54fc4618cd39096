import { AGENT_CONFIG } from '../../agent/config.js';
import { keysOf } from '../../core/config/keys.js';
import { renderConfig, renderKeys } from '../../core/config/print.js';
import { TetherError } from '../../core/errors.js';
import { GATEWAY_CONFIG } from '../../gateway/config.js';
import type { Command, OptionSpec } from '../args.js';
import { configOptions, loadProgramConfig, type AnyConfigSpec } from '../program-config.js';
import { UP_CONFIG } from '../up-config.js';

/** The programs that read a configuration, by name. */
const PROGRAMS: Record<string, AnyConfigSpec> = {
  gateway: GATEWAY_CONFIG as unknown as AnyConfigSpec,
  agent: AGENT_CONFIG as unknown as AnyConfigSpec,
  up: UP_CONFIG as unknown as AnyConfigSpec,
};

const OWN_OPTIONS = {
  print: { type: 'boolean' },
  keys: { type: 'boolean' },
  program: { type: 'string' },
  json: { type: 'boolean' },
} as const satisfies OptionSpec;

/** `tether config`: shows the effective configuration of a program, or every key it has. */
export const configCommand: Command = {
  name: 'config',
  summary: 'show the effective configuration of gateway, agent or up (secrets masked)',
  usage: `Usage: tether config --print [--program gateway|agent|up] [--json] [--config FILE] [PROGRAM FLAGS]...
       tether config --keys [--program gateway|agent|up]

--print loads the configuration exactly as "tether PROGRAM" would (the --config file or
TETHER_CONFIG, then TETHER_* variables, then flags, each overriding the one before) and prints
it as YAML with secrets masked, each value not at its default followed by where it came from.
An invalid configuration prints every problem and exits 2. Nothing is opened or created.
--keys lists every key of the program with its default, flag and variable.

Options:
  --print            print the effective configuration
  --keys             list the configuration keys
  --program NAME     gateway (default), agent or up
  --json             --print as JSON (no source comments)
  --config FILE      configuration file, JSON or YAML
  -h, --help         show this help
Any flag of the program (e.g. --port 9000 for the gateway) is applied as that program would.`,
  options: { ...configOptions(PROGRAMS.gateway), ...configOptions(PROGRAMS.agent), ...configOptions(PROGRAMS.up), ...OWN_OPTIONS },
  async run(v) {
    const name = (v.program as string | undefined) ?? 'gateway';
    const spec = PROGRAMS[name];
    if (!spec) throw new TetherError('INVALID_ARGUMENT', `--program must be gateway, agent or up, got "${name}"`);
    if (v.print === v.keys) throw new TetherError('INVALID_ARGUMENT', 'give --print or --keys\nRun "tether config --help" for usage.');
    const allowed = new Set([...Object.keys(configOptions(spec)), ...Object.keys(OWN_OPTIONS), 'help']);
    const foreign = Object.keys(v).filter((k) => v[k] !== undefined && !allowed.has(k));
    if (foreign.length)
      throw new TetherError('INVALID_ARGUMENT', `${foreign.map((f) => `--${f}`).join(', ')}: not an option of tether ${name}`);
    if (v.keys) {
      process.stdout.write(
        `Configuration keys of tether ${name} (flag, TETHER_* variable; "key" in a --config file):\n${renderKeys(keysOf(spec.schema))}\n`,
      );
      return 0;
    }
    process.stdout.write(renderConfig(loadProgramConfig(spec, v), { json: v.json === true }));
    return 0;
  },
};
