import { readFileSync, statSync } from 'node:fs';
import { TetherError } from '../../core/errors.js';
import {
  DIFF_DEFAULT_BYTES,
  FOLDER_LIST_MAX,
  LOG_DEFAULT_COMMITS,
  refProblem,
  type ChangedFile,
  type FolderResultOf,
} from '../../core/protocol/folder-view.js';
import { looksBinary } from './file-read.js';
import { pathInFolder, realFolder, type FolderScope } from './folder-paths.js';
import { gitIn, type GitOutput } from './git-run.js';

/**
 * The git side of the folder view: branch and changes, diffs against HEAD or a base, recent
 * commits. Every path is the session folder's own (`--relative`, pathspec `.` or a checked path
 * after `--`); a base reaches git only as the commit `rev-parse --verify --end-of-options` made of it.
 */

type Git = (args: readonly string[], okCodes?: number[]) => Promise<GitOutput>;

/** The object name of the empty tree (SHA-1): what a repository without commits is compared with. */
const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';
/** Untracked files above this size get no line counts (they are not read whole for them). */
const COUNT_MAX_BYTES = 8 * 1024 * 1024;
/** Most untracked files whose text one diff answer carries. */
const UNTRACKED_PATCH_MAX = 200;
/** Flags on every diff: no external diff, no textconv program, no colour, no submodules, paths relative to the session folder. */
const DIFF_FLAGS = ['--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', '--ignore-submodules=all', '--relative'];
/** `diff --no-index` (an untracked file as new) compares two paths: nothing of the repository's to ignore or make relative. */
const NO_INDEX_FLAGS = DIFF_FLAGS.slice(0, 3);

async function openRepo(scope: FolderScope): Promise<{ git: Git; prefix: string }> {
  const folder = realFolder(scope);
  const git = await gitIn(folder);
  const top = await git(['rev-parse', '--show-prefix']).catch(() => {
    throw new TetherError('FAILED_PRECONDITION', 'the session folder is not in a git repository');
  });
  return { git, prefix: top.stdout.trim() };
}

/** Branch, upstream, ahead/behind and the changed files (staged, unstaged, untracked) with counts against HEAD. */
export async function folderStatus(scope: FolderScope): Promise<FolderResultOf<'status'>> {
  const { git, prefix } = await openRepo(scope);
  const out = await git([
    'status',
    '--porcelain=v2',
    '--branch',
    '-z',
    '--untracked-files=all',
    '--ignore-submodules=all',
    '--no-renames',
    '--',
    '.',
  ]);
  const r: FolderResultOf<'status'> = { view: 'status', files: [] };
  const files: ChangedFile[] = [];
  for (const rec of out.stdout.split('\0')) {
    if (rec.startsWith('# branch.oid ')) {
      const oid = rec.slice(13);
      if (oid !== '(initial)') r.head = oid;
    } else if (rec.startsWith('# branch.head ')) {
      const head = rec.slice(14);
      if (head !== '(detached)') r.branch = head;
    } else if (rec.startsWith('# branch.upstream ')) r.upstream = rec.slice(18);
    else if (rec.startsWith('# branch.ab ')) {
      const m = /^\+(\d+) -(\d+)$/.exec(rec.slice(12));
      if (m) [r.ahead, r.behind] = [Number(m[1]), Number(m[2])];
    } else if (rec.startsWith('1 ') || rec.startsWith('u ')) {
      const parts = rec.split(' ');
      const xy = parts[1];
      const path = stripPrefix(parts.slice(rec.startsWith('1 ') ? 8 : 10).join(' '), prefix);
      files.push({ path, xy, staged: xy[0] !== '.', unstaged: xy[1] !== '.', untracked: false });
    } else if (rec.startsWith('? '))
      files.push({ path: stripPrefix(rec.slice(2), prefix), xy: '??', staged: false, unstaged: false, untracked: true });
  }
  const counts = await numstat(git, r.head ?? EMPTY_TREE, '.');
  for (const f of files.slice(0, FOLDER_LIST_MAX)) {
    const c = f.untracked ? untrackedCounts(scope, f.path) : counts.get(f.path);
    if (c) Object.assign(f, c);
  }
  r.files = files.slice(0, FOLDER_LIST_MAX);
  if (files.length > FOLDER_LIST_MAX) r.cut = `the first ${FOLDER_LIST_MAX} of ${files.length} changed files`;
  return r;
}

export interface DiffAsk {
  path?: string;
  base?: string;
  stat?: boolean;
  maxBytes?: number;
}

/**
 * The diff of the work tree (staged and unstaged together) against HEAD or `base`, for one path
 * or the whole folder, untracked files shown as new. Patch text past `maxBytes` is cut at a line
 * end with a note; binary files are named by git ("Binary files … differ"), never sent.
 */
export async function folderDiff(scope: FolderScope, ask: DiffAsk): Promise<FolderResultOf<'diff'>> {
  const { git } = await openRepo(scope);
  const spec = ask.path === undefined || ask.path === '' || ask.path === '.' ? '.' : ask.path;
  if (spec !== '.') pathInFolder(scope, spec);
  const baseName = ask.base ?? 'HEAD';
  const baseCommit = await resolveCommit(git, baseName);
  const counts = await numstat(git, baseCommit ?? EMPTY_TREE, spec);
  const files: FolderResultOf<'diff'>['files'] = [...counts].map(([path, c]) => ({ path, ...c }));
  const untracked = (await git(['ls-files', '--others', '--exclude-standard', '-z', '--', spec])).stdout.split('\0').filter(Boolean);
  const notes: string[] = [];
  const shown: string[] = [];
  for (const path of untracked) {
    try {
      pathInFolder(scope, path);
    } catch {
      notes.push(`${path}: leads outside the session folder, not shown`);
      continue;
    }
    files.push({ path, untracked: true, ...untrackedCounts(scope, path) });
    shown.push(path);
  }
  const result: FolderResultOf<'diff'> = {
    view: 'diff',
    base: baseName,
    ...(baseCommit ? { base_commit: baseCommit } : {}),
    files: files.slice(0, FOLDER_LIST_MAX),
  };
  if (files.length > FOLDER_LIST_MAX) notes.push(`the first ${FOLDER_LIST_MAX} of ${files.length} files`);
  if (!ask.stat) {
    const cap = ask.maxBytes ?? DIFF_DEFAULT_BYTES;
    const parts = [(await git(['diff', ...DIFF_FLAGS, baseCommit ?? EMPTY_TREE, '--', spec])).stdout];
    for (const path of shown.slice(0, UNTRACKED_PATCH_MAX)) {
      if (parts.reduce((n, p) => n + Buffer.byteLength(p), 0) > cap) break;
      parts.push((await git(['diff', '--no-index', ...NO_INDEX_FLAGS, '--', '/dev/null', path], [0, 1])).stdout);
    }
    if (shown.length > UNTRACKED_PATCH_MAX) notes.push(`the text of the first ${UNTRACKED_PATCH_MAX} untracked files only`);
    const { text, cut } = cutAtLine(parts.join(''), cap);
    result.patch = text;
    if (cut) notes.push(cut);
  }
  if (notes.length > 0) result.cut = notes.join('; ').slice(0, 512);
  return result;
}

/** The most recent commits of HEAD (none in a repository without commits). */
export async function folderLog(scope: FolderScope, limit = LOG_DEFAULT_COMMITS): Promise<FolderResultOf<'log'>> {
  const { git } = await openRepo(scope);
  if (!(await resolveCommit(git, 'HEAD'))) return { view: 'log', commits: [] };
  const out = await git(['log', '--no-color', `--max-count=${limit}`, '--format=%H%x00%an%x00%aI%x00%s%x1e', 'HEAD', '--']);
  const commits = out.stdout
    .split('\x1e')
    .map((r) => r.replace(/^\n/, ''))
    .filter(Boolean)
    .map((r) => {
      const [hash, author, date, subject] = r.split('\0');
      return { hash, author, date, subject };
    });
  return { view: 'log', commits };
}

/**
 * `name` as a commit, checked twice: the ref rule (it cannot start with `-`) and
 * `rev-parse --verify --end-of-options`. Undefined for HEAD in a repository without commits.
 */
async function resolveCommit(git: Git, name: string): Promise<string | undefined> {
  const problem = refProblem(name);
  if (problem) throw new TetherError('INVALID_ARGUMENT', `ref "${name.slice(0, 64)}": ${problem}`);
  const out = await git(['rev-parse', '--verify', '--quiet', '--end-of-options', `${name}^{commit}`], [0, 1]);
  const hash = out.stdout.trim();
  if (out.code === 0 && /^[0-9a-f]{40,64}$/.test(hash)) return hash;
  if (name === 'HEAD') return undefined;
  throw new TetherError('NOT_FOUND', `no branch or commit named "${name}" in the session's repository`);
}

/** Lines added and deleted per path against `commit` (binary: no counts), paths relative to the folder. */
async function numstat(
  git: Git,
  commit: string,
  spec: string,
): Promise<Map<string, { added?: number; deleted?: number; binary?: boolean }>> {
  const out = await git(['diff', '--numstat', '-z', ...DIFF_FLAGS, commit, '--', spec]);
  const counts = new Map<string, { added?: number; deleted?: number; binary?: boolean }>();
  for (const rec of out.stdout.split('\0')) {
    const m = /^(\d+|-)\t(\d+|-)\t(.*)$/s.exec(rec);
    if (!m) continue;
    counts.set(m[3], m[1] === '-' ? { binary: true } : { added: Number(m[1]), deleted: Number(m[2]) });
  }
  return counts;
}

/** An untracked file's lines (all added), counted as git's numstat would; binary files and huge ones get none. */
function untrackedCounts(scope: FolderScope, rel: string): { added?: number; deleted?: number; binary?: boolean } {
  try {
    const { real } = pathInFolder(scope, rel);
    const st = statSync(real);
    if (!st.isFile() || st.size > COUNT_MAX_BYTES) return {};
    const bytes = readFileSync(real);
    if (looksBinary(bytes)) return { binary: true };
    let lines = 0;
    for (const b of bytes) if (b === 10) lines++;
    if (bytes.length > 0 && bytes[bytes.length - 1] !== 10) lines++;
    return { added: lines, deleted: 0 };
  } catch {
    return {}; // leads out of the folder, or gone meanwhile: listed without counts
  }
}

function stripPrefix(path: string, prefix: string): string {
  return prefix !== '' && path.startsWith(prefix) ? path.slice(prefix.length) : path;
}

/** `text` up to `cap` bytes, cut at the last line end before it, with a note of what was left out. */
function cutAtLine(text: string, cap: number): { text: string; cut?: string } {
  const bytes = Buffer.from(text);
  if (bytes.length <= cap) return { text };
  const head = bytes.subarray(0, cap);
  const end = head.lastIndexOf(10);
  const kept = head.subarray(0, end < 0 ? cap : end + 1).toString('utf8');
  return { text: kept, cut: `diff cut at ${Buffer.byteLength(kept)} of ${bytes.length} bytes (the diff cap)` };
}
