import type { z } from 'zod';
import { keysOf } from '../core/config/keys.js';
import { CONFIG_FILE_ENV, loadConfig, type ConfigSpec, type LoadedConfig } from '../core/config/load.js';
import { renderKeys } from '../core/config/print.js';
import type { OptionSpec } from './args.js';

/** A program's configuration spec, whatever its schema. */
export type AnyConfigSpec = ConfigSpec<z.ZodObject, unknown>;

/**
 * parseArgs options for a program: --config and every configuration key that has a flag
 * (list keys repeat; a boolean key is a switch that takes no value, as --help shows it).
 */
export function configOptions(spec: AnyConfigSpec): OptionSpec {
  const out: OptionSpec = { config: { type: 'string' } };
  for (const k of keysOf(spec.schema)) {
    if (!k.flag) continue;
    if (k.kind === 'boolean') out[k.flag] = { type: 'boolean' };
    else out[k.flag] = k.kind === 'list' || k.kind === 'map' ? { type: 'string', multiple: true } : { type: 'string' };
  }
  return out;
}

/** The end of a program's --help: how configuration is read, then every key with its default, flag and variable. */
export function configUsage(spec: AnyConfigSpec): string {
  return `Configuration: --config FILE (or ${CONFIG_FILE_ENV}) reads a JSON or YAML file of the keys below;
TETHER_* variables override the file and flags override both. Every problem is reported at
once, before anything listens. "tether config --print --program ${spec.program}" shows the result.
${renderKeys(keysOf(spec.schema))}`;
}

/** Loads a program's configuration from its parsed flags, the environment and --config (throws ConfigError, exit 2). */
export function loadProgramConfig<S extends z.ZodObject, T>(spec: ConfigSpec<S, T>, flags: Record<string, unknown>): LoadedConfig<T> {
  return loadConfig(spec, { flags });
}
