import { realpathSync } from 'node:fs';
import { posix } from 'node:path';
import { POLICY_CALLBACK_ID } from '../core/policy/hook.js';
import { PATH_FIELDS } from '../core/policy/rules.js';
import type { LineMeta } from '../core/protocol/methods.js';

/**
 * The path a policy hook call acts on, with symlinks followed on this machine: the gateway
 * judges path rules on both the path as written and this one (core/policy/rules.ts), so a
 * symlink inside the session folder that points into a protected folder meets the rule of
 * the folder it reaches. Read here because only the agent sees the engine's disk.
 */

/** Longest path sent (PATH_MAX): the kernel refuses longer ones anyway. */
const MAX_PATH = 4096;

/** `resolved` for the line's meta when it is a policy hook callback; undefined otherwise. */
export function resolvedPaths(value: Record<string, unknown>): LineMeta['resolved'] {
  if (value.type !== 'control_request') return undefined;
  const request = value.request as { subtype?: unknown; callback_id?: unknown; input?: Record<string, unknown> } | undefined;
  if (request?.subtype !== 'hook_callback' || request.callback_id !== POLICY_CALLBACK_ID) return undefined;
  const input = request.input ?? {};
  if (typeof input.cwd !== 'string' || !input.cwd.startsWith('/')) return undefined;
  const tool = (typeof input.tool_input === 'object' && input.tool_input !== null ? input.tool_input : {}) as Record<string, unknown>;
  const p = PATH_FIELDS.map((f) => tool[f]).find((v) => v !== undefined && v !== null); // the field core/policy/rules.ts judges
  const written = typeof p === 'string' && p !== '' ? p : undefined;
  const cwd = realPath(input.cwd);
  const path = written === undefined ? undefined : realPath(written.startsWith('/') ? written : `${input.cwd}/${written}`);
  if (cwd.length > MAX_PATH || (path?.length ?? 0) > MAX_PATH) return undefined;
  return path === undefined ? { cwd } : { cwd, path };
}

/**
 * The path the kernel would reach: the real path of its deepest existing ancestor (taken on
 * the path as written, so `link/..` climbs from where the link leads, as the kernel does)
 * and the rest, which does not exist yet, after it.
 */
export function realPath(abs: string): string {
  const rest: string[] = [];
  let head = abs;
  for (;;) {
    try {
      const real = realpathSync.native(head); // the JS one collapses link/.. by spelling first
      return rest.length === 0 ? real : posix.normalize(`${real}/${rest.reverse().join('/')}`);
    } catch {
      if (head === '/' || head === '') return posix.normalize(abs);
      rest.push(posix.basename(head));
      head = posix.dirname(head);
    }
  }
}
