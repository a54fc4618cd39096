import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pathInFolder, realFolder } from '../agent/folder-view/folder-paths.js';
import { readInFolder } from '../agent/folder-view/file-read.js';
import { asTetherError } from '../core/errors.js';
import { FolderQuery, refProblem, relativePathProblem } from '../core/protocol/folder-view.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';

/** The rules a member's ref and path meet before git or the disk sees them (issue 34; the real-CLI test drives them end to end). */
describe('folder view: refs, paths and the session roots', () => {
  const dirs: TempDir[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) d.cleanup();
  });
  const codeOf = (f: () => unknown) => {
    try {
      f();
      return 'ok';
    } catch (err) {
      return `${asTetherError(err).code}: ${asTetherError(err).message}`;
    }
  };

  it('takes branch, tag and commit names, and refuses anything that could read as an option or a ref expression', () => {
    for (const ok of ['main', 'feature/x-1', 'v1.2.3', 'HEAD~2', 'HEAD^', 'a1b2c3d', 'release+2', 'origin/main'])
      expect(refProblem(ok)).toBeUndefined();
    for (const bad of [
      '-p',
      '--output=/tmp/x',
      '--ext-diff',
      '',
      'a..b',
      'a//b',
      'x.lock',
      '.hidden',
      'a/.b',
      'a b',
      'main@{1}',
      'a:b',
      'x/',
      'HEAD~-1',
      'a\nb',
    ])
      expect(refProblem(bad), bad).toBeDefined();
    expect(FolderQuery.safeParse({ view: 'diff', base: '--output=x' }).success).toBe(false);
    expect(FolderQuery.safeParse({ view: 'diff', base: 'main', path: 'src/a.ts' }).success).toBe(true);
    expect(FolderQuery.safeParse({ view: 'status', extra: 1 }).success).toBe(false); // strict: nothing unnamed rides along
  });

  it('takes relative paths only: no leading /, no .., no NUL or line break', () => {
    for (const ok of ['a.txt', 'src/app.ts', '.', '', '--output=x', ':(glob)*', 'dir/..x'])
      expect(relativePathProblem(ok), ok).toBeUndefined();
    for (const bad of ['/etc/passwd', '../x', 'a/../../b', 'a/..', '..', 'a\0b', 'a\nb', '\\\\server\\x', 'a\\..\\b'])
      expect(relativePathProblem(bad), bad).toBeDefined();
  });

  it('keeps a path inside the folder through symlinks, and the folder inside the agent --session-roots', () => {
    const root = makeTempDir('tether-fv-root-');
    const other = makeTempDir('tether-fv-other-');
    dirs.push(root, other);
    const folder = join(root.path, 'proj');
    mkdirSync(join(folder, 'src'), { recursive: true });
    writeFileSync(join(folder, 'src', 'a.txt'), 'a\n');
    writeFileSync(join(root.path, 'sibling.txt'), 'next door\n');
    symlinkSync(join(root.path, 'sibling.txt'), join(folder, 'to-sibling'));
    symlinkSync(join(folder, 'src'), join(folder, 'src-link'));
    symlinkSync(join(other.path, 'nowhere'), join(folder, 'dangling-out'));
    const scope = { cwd: folder, roots: [root.path] };
    expect(realFolder(scope)).toBe(folder);
    expect(pathInFolder(scope, 'src-link/a.txt').real).toBe(join(folder, 'src', 'a.txt')); // a link that stays inside is fine
    expect(readInFolder(scope, 'src-link/a.txt').content).toBe('a\n');
    // Inside the root but outside the folder: still refused.
    expect(codeOf(() => pathInFolder(scope, 'to-sibling'))).toMatch(
      /^PERMISSION_DENIED: path "to-sibling" leads outside the session folder/,
    );
    // A link whose target does not exist yet is judged by where it would lead.
    expect(codeOf(() => pathInFolder(scope, 'dangling-out'))).toMatch(/^PERMISSION_DENIED: path "dangling-out" leads outside/);
    expect(codeOf(() => pathInFolder(scope, 'dangling-out/deeper/x'))).toMatch(/^PERMISSION_DENIED/);
    symlinkSync('later.txt', join(folder, 'to-later'));
    expect(pathInFolder(scope, 'to-later').real).toBe(join(folder, 'later.txt'));
    expect(codeOf(() => pathInFolder(scope, 'src/../../sibling.txt'))).toMatch(/^INVALID_ARGUMENT: .*may not climb out/);
    // The folder itself outside the agent's roots (its session-root changed, or a link moved): nothing is read.
    expect(codeOf(() => readInFolder({ cwd: folder, roots: [other.path] }, 'src/a.txt'))).toMatch(
      /^PERMISSION_DENIED: the session folder is outside the agent's --session-root folders/,
    );
    expect(codeOf(() => readInFolder({ cwd: join(root.path, 'gone'), roots: [] }, 'a'))).toMatch(/^NOT_FOUND: the session folder/);
    expect(codeOf(() => readInFolder(scope, 'src/missing.txt'))).toMatch(/^NOT_FOUND: no file "src\/missing.txt"/);
  });
});
