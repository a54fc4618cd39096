import { Document, isScalar, type Node } from 'yaml';
import type { ConfigKey } from './keys.js';
import type { LoadedConfig } from './load.js';

/** What a secret value prints as. */
export const MASK = '[redacted]';

/** The user and password (or token) a URL may carry, e.g. nats://USER:PASS@HOST. */
const URL_CREDENTIALS = /^([a-z][a-z0-9+.-]*:\/\/)[^/@\s]+@/i;

/**
 * A copy of the configuration with every secret key that has a value replaced by {@link MASK},
 * and the credentials of any URL value too.
 */
export function maskSecrets<T>(config: T, keys: ConfigKey[]): T {
  const copy = structuredClone(config) as Record<string, unknown>;
  for (const key of keys) {
    let at: Record<string, unknown> | undefined = copy;
    for (const p of key.path.slice(0, -1)) at = at?.[p] as Record<string, unknown> | undefined;
    const leaf = key.path[key.path.length - 1];
    if (!at || at[leaf] === undefined || at[leaf] === null) continue;
    if (key.secret) at[leaf] = MASK;
    else if (typeof at[leaf] === 'string') at[leaf] = (at[leaf] as string).replace(URL_CREDENTIALS, `$1${MASK}@`);
  }
  return copy as T;
}

/**
 * The effective configuration as YAML, secrets masked, each value set by the file, a
 * variable or a flag commented with where it came from; or as JSON (no comments). Keys left
 * unset print as `null` so every key is visible.
 */
export function renderConfig(loaded: LoadedConfig<unknown>, opts: { json?: boolean } = {}): string {
  const masked = maskSecrets(loaded.config, loaded.keys) as Record<string, unknown>;
  const shown: Record<string, unknown> = {};
  for (const key of loaded.keys) setIn(shown, key.path, valueAt(masked, key.path) ?? null); // schema order, every key
  if (opts.json) return JSON.stringify(shown, null, 2) + '\n';
  const doc = new Document(shown);
  doc.commentBefore = ` effective configuration of tether ${loaded.program}${loaded.file ? ` (config file ${loaded.file})` : ''}; secrets masked`;
  for (const key of loaded.keys) {
    const name = key.note ? keyNodeAt(doc, key.path) : undefined;
    if (name) name.commentBefore = ` ${key.note}`;
  }
  for (const [name, source] of Object.entries(loaded.sources)) {
    const node = doc.getIn(name.split('.'), true) as Node | undefined;
    if (node && isScalar(node)) node.comment = ` ${source}`;
    else if (node) node.commentBefore = ` ${source}`;
  }
  return doc.toString({ lineWidth: 0 });
}

/** The key node of the map entry at `path`: a comment on it prints above the key. */
function keyNodeAt(doc: Document, path: string[]): Node | undefined {
  const parent = path.length > 1 ? doc.getIn(path.slice(0, -1), true) : doc.contents;
  const items = (parent as { items?: { key: unknown }[] } | null)?.items;
  const key = items?.find((p) => isScalar(p.key) && p.key.value === path[path.length - 1])?.key;
  return isScalar(key) ? key : undefined;
}

function valueAt(obj: unknown, path: string[]): unknown {
  let at = obj;
  for (const p of path) at = at !== null && typeof at === 'object' ? (at as Record<string, unknown>)[p] : undefined;
  return at;
}

function setIn(obj: Record<string, unknown>, path: string[], value: unknown): void {
  let at = obj;
  for (const p of path.slice(0, -1)) at = (at[p] ??= {}) as Record<string, unknown>;
  at[path[path.length - 1]] = value;
}

/** Every key of a program: name, default, flag and variable, then what it does. For --help and `tether config --keys`. */
export function renderKeys(keys: ConfigKey[]): string {
  return keys
    .map((k) => {
      const ways = [k.flag && `--${k.flag}`, k.env].filter(Boolean).join(', ');
      const dflt = k.defaultValue === undefined ? '' : ` = ${JSON.stringify(k.defaultValue)}`;
      return `  ${k.name}${dflt}${ways ? `   (${ways})` : ''}\n      ${k.help}${k.secret ? ' (secret: masked when printed)' : ''}`;
    })
    .join('\n');
}
