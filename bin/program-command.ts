import type { z } from 'zod';
import type { ConfigSpec } from '../core/config/load.js';
import { createLogger, type Logger } from '../core/logging.js';
import type { Command } from './args.js';
import { configOptions, configUsage, loadProgramConfig } from './program-config.js';

/** What a long-running program's command says about itself; its flags and the end of its help come from its configuration. */
export interface ProgramCommandInfo {
  name: string;
  summary: string;
  /** The --help text down to `-h, --help`; the configuration keys' table is appended. */
  usage: string;
  /** The `name` of the program's root logger. */
  loggerName: string;
}

/**
 * A command of a long-running program (gateway, agent, up): its flags are --config and the
 * program's configuration keys, its --help ends with their table, and `run` gets the loaded
 * configuration (every problem reported at once, before anything opens or dials) and the
 * program's root logger.
 */
export function programCommand<S extends z.ZodObject, T extends { logLevel: string; logFormat: 'auto' | 'json' | 'pretty' }>(
  spec: ConfigSpec<S, T>,
  info: ProgramCommandInfo,
  run: (config: T, logger: Logger) => Promise<number>,
): Command {
  return {
    name: info.name,
    summary: info.summary,
    usage: `${info.usage}\n\n${configUsage(spec)}`,
    options: configOptions(spec),
    async run(v) {
      const { config } = loadProgramConfig(spec, v);
      return run(config, createLogger({ name: info.loggerName, level: config.logLevel, format: config.logFormat }));
    },
  };
}
