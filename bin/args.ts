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
  run(values: Record<string, unknown>, positionals: string[]): Promise<number>;
}

/** Parses argv for one command; `--help` is always accepted. Bad flags throw INVALID_ARGUMENT. */
export function parseCommand(cmd: Command, argv: string[]): { values: Record<string, unknown>; positionals: string[]; help: boolean } {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: { ...cmd.options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: cmd.allowPositionals ?? false,
      strict: true,
    });
    return { values, positionals, help: values.help === true };
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `${(err as Error).message}\nRun "tether ${cmd.name} --help" for usage.`);
  }
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
