/**
 * Where sessions may work. The folder a session names decides which project settings the
 * engine loads (`.claude/settings.json` hooks run commands at start, without a prompt) and
 * which files its tools may read or edit without asking, so an agent's owner can confine
 * sessions to some folders (`--session-root DIR`, repeatable; default: anywhere).
 */
import { realpathSync } from 'node:fs';
import { sep } from 'node:path';
import { TetherError } from '../core/errors.js';

/**
 * Throws PERMISSION_DENIED unless `cwd` (resolved through symlinks) is one of `roots` or
 * inside one. No roots: every folder is allowed.
 */
export function checkSessionFolder(
  cwd: string,
  roots: readonly string[],
  agent: string,
  source = `--session-root: ${roots.join(', ')}`,
): void {
  if (roots.length === 0) return;
  const real = realpathSync(cwd);
  const inside = roots.some((root) => {
    const r = realpathOrSelf(root);
    return real === r || real.startsWith(r.endsWith(sep) ? r : r + sep);
  });
  if (!inside)
    throw new TetherError(
      'PERMISSION_DENIED',
      `working folder ${cwd} is outside the folders agent "${agent}" lets sessions use (${source})`,
    );
}

function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
