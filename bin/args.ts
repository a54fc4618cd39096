import { parseArgs, type ParseArgsConfig } from 'node:util';
import { TetherError } from '../core/errors.js';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

/** A command: its usage text and what it does with parsed arguments. */
export interface Command {
  name: string;
  summary: string;
  usage: string;
  options: OptionSpec;
  allowPositionals?: boolean;
  /**
   * String flags whose value may be left out; a bare one reads as ''. `next`: the next word is
   * its value unless there is none or it starts with '-'; `attached`: only `--flag=VALUE` gives
   * one (for commands whose positionals follow, e.g. run's PROMPT).
   */
  optionalValues?: Readonly<Record<string, 'next' | 'attached'>>;
  run(values: Record<string, unknown>, positionals: string[]): Promise<number>;
}

/** Parses argv for one command; `--help` is always accepted. Bad flags throw INVALID_ARGUMENT. */
export function parseCommand(cmd: Command, argv: string[]): { values: Record<string, unknown>; positionals: string[]; help: boolean } {
  try {
    const { values, positionals } = parseArgs({
      args: withOptionalValues(argv, cmd.optionalValues ?? {}),
      options: { ...cmd.options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: cmd.allowPositionals ?? false,
      strict: true,
    });
    return { values, positionals, help: values.help === true };
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `${(err as Error).message}\nRun "tether ${cmd.name} --help" for usage.`);
  }
}

/** Gives each bare optional-value flag an empty value (`--flag=`), so parseArgs reads it as a string flag. */
function withOptionalValues(argv: string[], optional: Readonly<Record<string, 'next' | 'attached'>>): string[] {
  return argv.map((arg, i) => {
    const how = arg.startsWith('--') ? optional[arg.slice(2)] : undefined;
    if (how === undefined) return arg;
    const next = argv[i + 1];
    return how === 'attached' || next === undefined || next.startsWith('-') ? `${arg}=` : arg;
  });
}

/** A flag, else an environment variable, else a default. */
export function pick(value: unknown, envName: string, fallback?: string): string | undefined {
  if (typeof value === 'string' && value !== '') return value;
  const env = process.env[envName];
  return env !== undefined && env !== '' ? env : fallback;
}

/** The value, or INVALID_ARGUMENT naming what is missing. */
export function required(value: string | undefined, what: string): string {
  if (!value) throw new TetherError('INVALID_ARGUMENT', `missing ${what}`);
  return value;
}
