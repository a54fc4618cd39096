import { TetherError } from '../../core/errors.js';
import { DIFF_MAX_BYTES, type FolderResultOf } from '../../core/protocol/folder-view.js';
import { readFolder } from '../../client/folder-view.js';
import type { Command } from '../args.js';
import { connectFrom, connectionHelp, CONNECTION_OPTIONS, TLS_CLIENT_HELP } from '../connection-flags.js';
import { byteCount } from './files.js';

export const diffCommand: Command = {
  name: 'diff',
  summary: 'show what a session changed in its folder: the diff against HEAD or a base, or --stat',
  usage: `Usage: tether diff SESSION [--stat] [--base REF] [FILE]

Shows the changes in SESSION's folder as its agent reads them with git: the work tree (staged
and unstaged, untracked files as new) against HEAD, or against REF (a branch or commit). With
FILE (a path relative to the session folder), that file only. Any member of the session may
read it, viewers too. Large diffs are cut at the cap, and stderr says so.

Options:
${connectionHelp(18)}
  --stat          the branch and the changed files with their line counts, no diff text
  --base REF      compare with REF instead of HEAD
  --max-bytes N   the most diff text to print (default 1 MiB, at most ${DIFF_MAX_BYTES / 1024 / 1024} MiB)
${TLS_CLIENT_HELP}
  -h, --help      show this help`,
  options: { ...CONNECTION_OPTIONS, stat: { type: 'boolean' }, base: { type: 'string' }, 'max-bytes': { type: 'string' } },
  allowPositionals: true,
  async run(v, positionals) {
    const [id, file, ...extra] = positionals;
    if (!id || extra.length > 0)
      throw new TetherError('INVALID_ARGUMENT', 'give one SESSION id and at most one FILE\nRun "tether diff --help" for usage.');
    const query = {
      view: 'diff' as const,
      ...(file === undefined ? {} : { path: file }),
      ...(typeof v.base === 'string' ? { base: v.base } : {}),
      ...(v.stat === true ? { stat: true } : {}),
      ...(typeof v['max-bytes'] === 'string' ? { max_bytes: byteCount(v['max-bytes'], 'diff') } : {}),
    };
    const client = await connectFrom(v, 'tether-diff');
    try {
      const peer = await client.peer();
      const diff = await readFolder(peer, id, query);
      if (v.stat === true) {
        const status = await readFolder(peer, id, { view: 'status' });
        process.stdout.write(statText(status, diff));
      } else process.stdout.write(diff.patch ?? '');
      if (diff.cut) process.stderr.write(`tether diff: ${diff.cut}\n`);
      return 0;
    } finally {
      await client.close();
    }
  },
};

/** `--stat`: where the folder stands, then one line per changed file and git's summary line. */
export function statText(status: FolderResultOf<'status'>, diff: FolderResultOf<'diff'>): string {
  const where = status.branch ? `on branch ${status.branch}` : `HEAD detached at ${status.head?.slice(0, 12) ?? '(no commits)'}`;
  const upstream =
    status.upstream === undefined ? '' : ` (upstream ${status.upstream}: ahead ${status.ahead ?? 0}, behind ${status.behind ?? 0})`;
  const against = `compared with ${diff.base}${diff.base_commit ? ` (${diff.base_commit.slice(0, 12)})` : ''}`;
  const lines = [`${where}${upstream}, ${against}`];
  let added = 0;
  let deleted = 0;
  for (const f of diff.files) {
    added += f.added ?? 0;
    deleted += f.deleted ?? 0;
    const counts = f.binary ? 'binary' : `+${f.added ?? 0} -${f.deleted ?? 0}`;
    lines.push(`${counts.padEnd(12)} ${f.path}${f.untracked ? ' (untracked)' : ''}`);
  }
  const n = diff.files.length;
  lines.push(
    `${n} file${n === 1 ? '' : 's'} changed, ${added} insertion${added === 1 ? '' : 's'}(+), ${deleted} deletion${deleted === 1 ? '' : 's'}(-)`,
  );
  return `${lines.join('\n')}\n`;
}
