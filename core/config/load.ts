import { readFileSync, statSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { TetherError } from '../errors.js';
import { fromText, keysOf, type ConfigKey } from './keys.js';

/** The environment variable naming a config file when `--config` is not given. */
export const CONFIG_FILE_ENV = 'TETHER_CONFIG';

/** Largest config file read; a bigger one is a problem, not a configuration. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

/** What {@link ConfigSpec.finish} may ask about the values it got. */
export interface FinishContext {
  /** Where a key's value came from: `--flag`, `TETHER_VAR`, the config file's path; undefined for a default. */
  sourceOf(name: string): string | undefined;
  /** Reports a problem with one key; loading fails once every problem was collected. */
  problem(name: string, message: string): void;
}

/** One program's configuration: its strict schema (keys carry {@link KeyMeta}) and what follows from the values. */
export interface ConfigSpec<S extends z.ZodObject, T> {
  /** The command, for messages: gateway, agent, up. */
  program: string;
  schema: S;
  /** Derived defaults and checks across keys; runs only on values that passed the schema. */
  finish(parsed: z.infer<S>, ctx: FinishContext): T;
}

/** Where the values come from; flags win over the environment, which wins over the file. */
export interface ConfigInputs {
  /** Parsed flags by flag name (parseArgs values); `config` names the file. Unknown names are ignored. */
  flags?: Record<string, unknown>;
  /** Default: process.env. */
  env?: NodeJS.ProcessEnv;
}

/** A loaded configuration, with where each value came from (for `tether config --print`). */
export interface LoadedConfig<T> {
  program: string;
  config: T;
  keys: ConfigKey[];
  /** Key name → `--flag`, `TETHER_VAR` or the file's path; keys at their default are absent. */
  sources: Record<string, string>;
  /** The config file read, if any. */
  file?: string;
}

/** Every problem of one configuration, reported at once; exit status 2 (INVALID_ARGUMENT). */
export class ConfigError extends TetherError {
  constructor(
    program: string,
    readonly problems: string[],
  ) {
    super(
      'INVALID_ARGUMENT',
      `invalid configuration for tether ${program} (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n  ${problems.join('\n  ')}`,
    );
  }
}

/**
 * Loads one program's configuration once, at start: the config file (`--config`, else
 * TETHER_CONFIG; JSON or YAML), then TETHER_* variables, then flags, each overriding the
 * one before per key. The merged object is checked against the strict schema (unknown keys,
 * types, ranges, and per-key checks such as a readable key file), then `finish` derives the
 * rest. Throws a {@link ConfigError} listing every problem with its key and source; nothing
 * has been opened or created by then.
 */
export function loadConfig<S extends z.ZodObject, T>(spec: ConfigSpec<S, T>, inputs: ConfigInputs = {}): LoadedConfig<T> {
  const env = inputs.env ?? process.env;
  const flags = inputs.flags ?? {};
  const keys = keysOf(spec.schema);
  const problems: string[] = [];
  const sources: Record<string, string> = {};
  const sourceFor = (name: string): string | undefined => {
    for (let n = name; n; n = n.includes('.') ? n.slice(0, n.lastIndexOf('.')) : '') if (sources[n]) return sources[n];
    return undefined;
  };
  const label = (name: string) => (sourceFor(name) ? `${name} (from ${sourceFor(name)})` : name);

  const file = nonEmpty(flags.config) ?? nonEmpty(env[CONFIG_FILE_ENV]);
  let merged: Record<string, unknown> = {};
  if (file !== undefined) {
    const read = readConfigFile(file);
    if ('problem' in read) problems.push(read.problem);
    else {
      merged = read.data;
      for (const name of leafNames(merged)) sources[name] = file;
    }
  }
  const apply = (key: ConfigKey, text: string | string[], source: string) => {
    sources[key.name] = source;
    const v = fromText(key, text);
    if ('problem' in v) problems.push(`${label(key.name)}: ${v.problem}`);
    else setPath(merged, key.path, v.value);
  };
  for (const key of keys) {
    const text = key.env ? nonEmpty(env[key.env]) : undefined;
    if (text !== undefined) apply(key, text, key.env!);
  }
  for (const key of keys) {
    const raw = key.flag ? flags[key.flag] : undefined;
    // A boolean key's flag is a switch: parseArgs gives `true` when it is present.
    const text = Array.isArray(raw) ? (raw.length ? (raw as string[]) : undefined) : typeof raw === 'boolean' ? String(raw) : nonEmpty(raw);
    if (text !== undefined) apply(key, text, `--${key.flag}`);
  }

  const parsed = spec.schema.safeParse(merged);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.push(...describeIssue(issue, merged, keys, label, file));
  }
  if (problems.length) throw new ConfigError(spec.program, problems);
  const config = spec.finish(parsed.data as z.infer<S>, {
    sourceOf: (name) => sources[name],
    problem: (name, message) => problems.push(`${label(name)}: ${message}`),
  });
  if (problems.length) throw new ConfigError(spec.program, problems);
  return { program: spec.program, config, keys, sources, file };
}

function nonEmpty(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** Reads and parses a config file: `.json` as JSON, anything else as YAML (which JSON also is). */
function readConfigFile(path: string): { data: Record<string, unknown> } | { problem: string } {
  let text: string;
  try {
    const size = statSync(path).size;
    if (size > MAX_CONFIG_FILE_BYTES) return { problem: `config file ${path}: larger than ${MAX_CONFIG_FILE_BYTES} bytes` };
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { problem: `config file ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
  }
  let data: unknown;
  try {
    data = extname(path).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text, { prettyErrors: false });
  } catch (err) {
    return {
      problem: `config file ${path}: not valid ${extname(path).toLowerCase() === '.json' ? 'JSON' : 'YAML'} (${(err as Error).message.split('\n')[0]})`,
    };
  }
  if (data === null || data === undefined) return { data: {} }; // an empty file
  if (typeof data !== 'object' || Array.isArray(data)) return { problem: `config file ${path}: must hold a mapping of keys to values` };
  return { data: data as Record<string, unknown> };
}

/** Dotted names of every leaf of a plain object (arrays and empty objects are leaves). */
function leafNames(obj: Record<string, unknown>, prefix = ''): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(obj)) {
    const name = prefix + k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length)
      out.push(...leafNames(v as Record<string, unknown>, name + '.'));
    else out.push(name);
  }
  return out;
}

function setPath(obj: Record<string, unknown>, path: string[], value: unknown): void {
  let at = obj;
  for (const p of path.slice(0, -1)) {
    const next = at[p];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) at[p] = {};
    at = at[p] as Record<string, unknown>;
  }
  at[path[path.length - 1]] = value;
}

function getPath(obj: unknown, path: PropertyKey[]): unknown {
  let at = obj;
  for (const p of path) {
    if (at === null || typeof at !== 'object') return undefined;
    at = (at as Record<PropertyKey, unknown>)[p];
  }
  return at;
}

/** One zod issue as problem lines: key (from source): what is wrong, in words an operator can act on. */
function describeIssue(
  issue: z.core.$ZodIssue,
  input: unknown,
  keys: ConfigKey[],
  label: (name: string) => string,
  file: string | undefined,
): string[] {
  const path = issue.path.map(String);
  const name = path.join('.') || '(root)';
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((k) => {
      const full = [...path, k].join('.');
      const siblings = keys
        .filter((key) => key.path.length === path.length + 1 && key.path.slice(0, -1).join('.') === path.join('.'))
        .map((key) => key.path[key.path.length - 1]);
      const near = closest(k, siblings);
      return `${full}${file ? ` (from ${file})` : ''}: unknown key${near ? ` (did you mean "${near}"?)` : ''}`;
    });
  }
  const key = keys.find((k) => k.name === name) ?? keys.find((k) => name.startsWith(k.name + '.'));
  const value = getPath(input, issue.path);
  const shown = key?.secret ? '[redacted]' : show(value);
  let what: string;
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined) {
        const ways = [key?.flag && `--${key.flag}`, key?.env, `"${name}" in the config file`].filter(Boolean);
        what = `missing: set ${ways.slice(0, -1).join(', ')}${ways.length > 1 ? ' or ' : ''}${ways[ways.length - 1]}`;
      } else {
        what = `expected ${typeWord(issue.expected)}, got ${shown}`;
      }
      break;
    case 'too_small':
      what = `must be ${issue.inclusive ? 'at least' : 'more than'} ${String(issue.minimum)}${sizeUnit(issue.origin)}, got ${shown}`;
      break;
    case 'too_big':
      what = `must be ${issue.inclusive ? 'at most' : 'less than'} ${String(issue.maximum)}${sizeUnit(issue.origin)}, got ${shown}`;
      break;
    case 'invalid_value':
      what = `must be one of ${issue.values.map(String).join(', ')}; got ${shown}`;
      break;
    default:
      what = issue.message;
  }
  return [`${label(name)}: ${what}`];
}

/** How a problem names the type zod expected; any other is named as zod names it. */
const TYPE_WORDS = new Map(
  Object.entries({
    int: 'an integer',
    number: 'a number',
    string: 'a string',
    boolean: 'true or false',
    array: 'a list',
    record: 'a mapping',
    object: 'a mapping',
  }),
);

function typeWord(expected: string): string {
  return TYPE_WORDS.get(expected) ?? expected;
}

function sizeUnit(origin: string): string {
  return origin === 'string' ? ' characters' : origin === 'array' ? ' items' : '';
}

function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? text.slice(0, 57) + '...' : text;
}

/** The candidate within edit distance 2 of `word` (case-insensitive), if any. */
function closest(word: string, candidates: string[]): string | undefined {
  let best: string | undefined;
  let bestD = 3;
  for (const c of candidates) {
    const d = distance(word.toLowerCase(), c.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best;
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length];
}
