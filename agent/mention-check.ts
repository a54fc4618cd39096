/**
 * The agent's check of a prompt's @-mentions, just before the prompt is written to the engine
 * (which reads a mentioned file into the prompt without a tool call: docs/engine-protocol.md,
 * "@-mentions"). The gateway judged each mention with the policy's read rules as written; only
 * here are symlinks and `~` known, so here each mention is resolved as the engine will resolve
 * it and refused when it leads outside the folders mentions may name.
 */
import { existsSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { TetherError } from '../core/errors.js';
import { mentionsInLine } from '../core/policy/mentions.js';

/** Where one session's mentions may lead. */
export interface MentionScope {
  /** The session's folder, absolute (the engine's cwd). */
  cwd: string;
  /** Folders beyond the session's own that mentions may name: the agent's --session-root and --mention-root folders. */
  roots: readonly string[];
  /** The engine's HOME, what `~/` means to it; undefined: a `~` mention is refused. */
  home: string | undefined;
  /**
   * The gateway judged the mentions against a central policy, as written: then a mention that
   * reaches its file through a symlink, or through `~`, is refused too, since the rules never saw
   * where it leads.
   */
  judgedAsWritten: boolean;
  /** The agent's name, for the error. */
  agent: string;
}

/**
 * Throws PERMISSION_DENIED naming the mention and where it leads when a `user` line mentions
 * an existing path outside the session's folder and `roots` (after symlinks, `..` and `~`), or
 * (under a central policy) one that gets there through a symlink or `~`. Other lines pass, and
 * so do mentions of nothing (the engine reads nothing for them).
 */
export function checkMentionsAt(line: Record<string, unknown>, scope: MentionScope): void {
  const mentions = mentionsInLine(line);
  if (mentions.length === 0) return;
  const cwdReal = realOf(scope.cwd);
  const areas = [cwdReal, ...scope.roots.map(realOf)];
  for (const mention of mentions) {
    const tilde = mention === '~' || mention.startsWith('~/');
    if (tilde && scope.home === undefined) refuse(mention, 'the engine has no HOME', scope);
    const abs = tilde ? join(scope.home!, mention.slice(1)) : resolve(scope.cwd, mention);
    const real = realOf(abs);
    // "link/.." climbs from where the link leads when the kernel resolves it, from the link's folder when
    // the path is normalised first: whichever the engine does, both must stay inside.
    const raw = tilde ? scope.home + mention.slice(1) : isAbsolute(mention) ? mention : `${scope.cwd}/${mention}`;
    const physical = physicalOf(raw);
    // The engine reads nothing for a name that leads nowhere (pasted code such as "@/components/x").
    if (physical === undefined && !existsSync(abs)) continue;
    for (const where of [real, physical]) {
      if (where === undefined || areas.some((area) => where === area || where.startsWith(area.endsWith(sep) ? area : area + sep))) continue;
      refuse(
        mention,
        `it leads to ${where}, outside the session folder ${scope.cwd}${scope.roots.length ? ` and the folders the agent lets mentions name (${scope.roots.join(', ')})` : ''}`,
        scope,
      );
    }
    if (!scope.judgedAsWritten) continue;
    const rel = relative(scope.cwd, abs);
    const asWritten = rel === '..' || rel.startsWith('..' + sep) || isAbsolute(rel) ? abs : join(cwdReal, rel);
    if (tilde || real !== asWritten)
      refuse(mention, `it reaches ${real} through ${tilde ? '~' : 'a symlink'}, and the policy judged only the name as written`, scope);
  }
}

function refuse(mention: string, why: string, scope: MentionScope): never {
  throw new TetherError(
    'PERMISSION_DENIED',
    `agent "${scope.agent}" refused the prompt: it mentions @${mention} and ${why}; the engine would read it without a tool call`,
  );
}

/** The kernel's resolution of `path` as written (`..` after a symlink climbs from its target); undefined when it names nothing. */
function physicalOf(path: string): string | undefined {
  try {
    return realpathSync.native(path);
  } catch {
    return undefined;
  }
}

/**
 * The real path of `path`, following every symlink that exists: the longest existing prefix is
 * resolved and the rest appended (a mention of a missing file under a symlinked folder still
 * leads where that folder leads).
 */
function realOf(path: string): string {
  const tail: string[] = [];
  for (let p = resolve(path); ; p = dirname(p)) {
    try {
      return join(realpathSync(p), ...tail.reverse());
    } catch {
      if (p === dirname(p)) return resolve(path);
      tail.push(basename(p));
    }
  }
}
