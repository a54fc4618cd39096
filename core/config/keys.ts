import type { z } from 'zod';

/**
 * How one configuration key can be set besides the config file, attached to its zod schema
 * with `.meta()`. The schema stays the single definition of a key: its type, its default
 * (a named constant) and these.
 */
export interface KeyMeta {
  /** One line for `--help` and `tether config --keys`. */
  help: string;
  /** Command-line flag without the dashes, e.g. 'grpc-port'. */
  flag?: string;
  /** Environment variable. Default: TETHER_ + the key's path in SCREAMING_SNAKE_CASE; false: none. */
  env?: string | false;
  /** Masked by `tether config --print`; never logged. */
  secret?: boolean;
  /** How to read the value, printed above the key by `tether config --print` (a key whose shape needs explaining). */
  note?: string;
}

/** How text from a flag or an environment variable becomes a value of the key's type. */
export type KeyKind = 'string' | 'number' | 'boolean' | 'list' | 'map';

/** One leaf key of a program's configuration, as found by walking its schema. */
export interface ConfigKey {
  /** Path in the configuration object, e.g. ['limits', 'helloTimeoutMs']. */
  path: string[];
  /** The path joined with dots: how problems and `--keys` name the key. */
  name: string;
  help: string;
  flag?: string;
  env?: string;
  secret: boolean;
  /** See {@link KeyMeta.note}. */
  note?: string;
  kind: KeyKind;
  /** `null` is allowed (written `off` in a flag or variable). */
  nullable: boolean;
  /** The default, if the schema has one. */
  defaultValue?: unknown;
}

type AnySchema = z.ZodType & {
  def: { type: string; innerType?: AnySchema; in?: AnySchema; out?: AnySchema; defaultValue?: unknown; shape?: Record<string, AnySchema> };
  meta(): unknown;
};

/** TETHER_ + the path in SCREAMING_SNAKE_CASE: ['limits', 'helloTimeoutMs'] → TETHER_LIMITS_HELLO_TIMEOUT_MS. */
export function defaultEnvName(path: string[]): string {
  return 'TETHER_' + path.map((p) => p.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_');
}

/**
 * Every leaf key of a strict object schema, in declaration order. A nested object without
 * its own meta is a section (its keys are listed); any other member must carry {@link KeyMeta}
 * (a programming error otherwise, thrown at once).
 */
export function keysOf(schema: z.ZodObject, prefix: string[] = []): ConfigKey[] {
  const out: ConfigKey[] = [];
  for (const [name, member] of Object.entries(schema.shape as Record<string, AnySchema>)) {
    const path = [...prefix, name];
    const meta = member.meta() as KeyMeta | undefined;
    let inner = member;
    let nullable = false;
    let defaultValue: unknown;
    for (;;) {
      const t = inner.def.type;
      if (t === 'default') defaultValue = inner.def.defaultValue;
      if (t === 'nullable') nullable = true;
      if (t === 'pipe') {
        // A preprocess or transform: the key's kind is that of the schema it wraps.
        inner = inner.def.out!.def.type === 'transform' ? inner.def.in! : inner.def.out!;
        continue;
      }
      if (t !== 'default' && t !== 'prefault' && t !== 'optional' && t !== 'nullable') break;
      inner = inner.def.innerType!;
    }
    if (!meta && inner.def.type === 'object') {
      out.push(...keysOf(inner as unknown as z.ZodObject, path));
      continue;
    }
    if (!meta?.help) throw new Error(`config key ${path.join('.')} has no .meta({ help })`);
    out.push({
      path,
      name: path.join('.'),
      help: meta.help,
      flag: meta.flag,
      env: meta.env === false ? undefined : (meta.env ?? defaultEnvName(path)),
      secret: meta.secret === true,
      note: meta.note,
      kind: kindOf(inner.def.type),
      nullable,
      defaultValue,
    });
  }
  return out;
}

/** The kind of a key by its zod type; every other type is read as a string. */
const KIND_OF_TYPE = new Map<string, KeyKind>(Object.entries({ number: 'number', boolean: 'boolean', array: 'list', record: 'map' }));

function kindOf(type: string): KeyKind {
  return KIND_OF_TYPE.get(type) ?? 'string';
}

/**
 * Text from a flag or an environment variable as a value of the key's kind. Text that does
 * not convert is returned unchanged, so the schema reports it with the key's path; a `map`
 * entry without `=` is a problem of its own.
 */
export function fromText(key: ConfigKey, text: string | string[]): { value: unknown } | { problem: string } {
  const texts = Array.isArray(text) ? text : [text];
  if (key.kind === 'list')
    return {
      value: texts
        .flatMap((t) => (Array.isArray(text) ? [t] : t.split(',')))
        .map((t) => t.trim())
        .filter(Boolean),
    };
  if (key.kind === 'map') {
    const map: Record<string, string> = {};
    for (const entry of texts.flatMap((t) => (Array.isArray(text) ? [t] : t.split(',')))) {
      const pair = entry.trim();
      if (!pair) continue;
      const i = pair.indexOf('=');
      if (i <= 0) return { problem: `must be KEY=VALUE, got "${pair}"` };
      map[pair.slice(0, i)] = pair.slice(i + 1);
    }
    return { value: map };
  }
  const one = texts[texts.length - 1];
  if (key.nullable && /^(off|none|null)$/i.test(one)) return { value: null };
  if (key.kind === 'number') {
    const n = Number(one);
    return { value: one.trim() !== '' && Number.isFinite(n) ? n : one };
  }
  if (key.kind === 'boolean') {
    if (/^(true|1|yes|on)$/i.test(one)) return { value: true };
    if (/^(false|0|no|off)$/i.test(one)) return { value: false };
  }
  return { value: one };
}
