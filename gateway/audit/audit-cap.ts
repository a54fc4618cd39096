import { createHash } from 'node:crypto';

/** Longest string kept whole in an audit record; longer ones keep their head and a note. */
export const AUDIT_MAX_STRING_CHARS = 1024;
/** Deepest nesting kept in an audit record; anything deeper is replaced by a marker. */
export const AUDIT_MAX_DEPTH = 8;

/** What was cut from one string: its full length and a digest that identifies it. */
export interface CutNote {
  chars: number;
  sha256: string;
}

/**
 * Whether {@link capStrings} would return `entry` as it is: every value a number, boolean,
 * null, undefined or a string of at most `maxChars` (a prompt's record, the usual case, is
 * then built without walking it).
 */
export function isFlatAndShort(entry: Record<string, unknown>, maxChars = AUDIT_MAX_STRING_CHARS): boolean {
  for (const k in entry) {
    const v = entry[k];
    if (typeof v === 'string' ? v.length > maxChars : typeof v === 'object' && v !== null) return false;
  }
  return true;
}

/**
 * Copies `value` with every string longer than `maxChars` cut to its first `maxChars`
 * characters. `cut` maps the path of each cut string (`options.system_prompt`,
 * `options.extra_args[3]`) to its original length and SHA-256, so a record stays small yet
 * still names exactly what the client sent. Nesting past {@link AUDIT_MAX_DEPTH} becomes
 * the string "[too deep]".
 */
export function capStrings(value: unknown, maxChars = AUDIT_MAX_STRING_CHARS): { value: unknown; cut: Record<string, CutNote> } {
  const cut: Record<string, CutNote> = {};
  const walk = (v: unknown, path: string, depth = 0): unknown => {
    if (depth > AUDIT_MAX_DEPTH) return '[too deep]';
    if (typeof v === 'string') {
      if (v.length <= maxChars) return v;
      cut[path] = { chars: v.length, sha256: createHash('sha256').update(v).digest('hex') };
      return v.slice(0, maxChars);
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}[${i}]`, depth + 1));
    if (typeof v === 'object' && v !== null) {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, path ? `${path}.${k}` : k, depth + 1)]));
    }
    return v;
  };
  return { value: walk(value, ''), cut };
}
