import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkMentionsAt, type MentionScope } from '../agent/mention-check.js';
import { MAX_MENTIONS, mentionsInContent } from '../core/policy/mentions.js';
import { Policy } from '../core/policy/policy.js';
import { checkMentions } from '../gateway/policy/policy-gate.js';
import { makeTempDir, type TempDir } from './support/claude-cli.js';
import { thrownBy as thrown } from './support/thrown.js';

const prompt = (text: string) => ({ type: 'user', message: { role: 'user', content: text } });

describe('mentions: the parts without the engine', () => {
  let proj: TempDir;
  let out: TempDir;
  beforeAll(() => {
    proj = makeTempDir('tether-mc-proj-');
    out = makeTempDir('tether-mc-out-');
    writeFileSync(join(out.path, 'shared.md'), 'x');
    writeFileSync(join(proj.path, 'a.txt'), 'x');
    mkdirSync(join(proj.path, 'sub'));
    symlinkSync(join(proj.path, 'a.txt'), join(proj.path, 'sub', 'alias.txt'));
    symlinkSync(out.path, join(proj.path, 'linked-dir'));
    mkdirSync(join(out.path, 'inner'));
    symlinkSync(join(out.path, 'inner'), join(proj.path, 'deep'));
  });
  afterAll(() => {
    proj?.cleanup();
    out?.cleanup();
  });
  const scope = (over: Partial<MentionScope> = {}): MentionScope => ({
    cwd: proj.path,
    roots: [],
    home: '/nonexistent-home',
    judgedAsWritten: false,
    agent: 'a1',
    ...over,
  });

  it('the agent: an existing file outside the folder is refused unless a --mention-root covers it, also through a symlinked folder; a missing one passes', () => {
    expect(thrown(() => checkMentionsAt(prompt(`see @${out.path}/shared.md`), scope()))?.code).toBe('PERMISSION_DENIED');
    expect(() => checkMentionsAt(prompt(`see @${out.path}/shared.md`), scope({ roots: [out.path] }))).not.toThrow();
    expect(() => checkMentionsAt(prompt('see @/etc/hostname'), scope({ roots: ['/'] }))).not.toThrow();
    expect(thrown(() => checkMentionsAt(prompt('see @linked-dir/shared.md'), scope()))?.message).toContain(
      `leads to ${out.path}/shared.md`,
    );
    // A name that leads nowhere is read by nobody: pasted code like "import x from @/components/x" passes.
    expect(() => checkMentionsAt(prompt('see @/no-such-folder/x and @linked-dir/not-yet.txt'), scope())).not.toThrow();
    expect(thrown(() => checkMentionsAt(prompt('see @~/x'), scope({ home: undefined })))?.message).toContain('no HOME');
    // deep -> OUT/inner: the kernel reads deep/../shared.md as OUT/shared.md (normalised first it would be PROJ/shared.md).
    expect(thrown(() => checkMentionsAt(prompt('see @deep/../shared.md'), scope()))?.message).toContain(`leads to ${out.path}/shared.md`);
    expect(() => checkMentionsAt(prompt('see @a.txt and @sub/ and mail me@x.org'), scope())).not.toThrow();
    expect(() => checkMentionsAt({ type: 'control_request', request: { subtype: 'interrupt' } }, scope())).not.toThrow();
  });

  it('the agent: a symlink inside the folder passes without a central policy, and is refused under one', () => {
    expect(() => checkMentionsAt(prompt('see @sub/alias.txt'), scope())).not.toThrow();
    expect(thrown(() => checkMentionsAt(prompt('see @sub/alias.txt'), scope({ judgedAsWritten: true })))?.message).toContain(
      'through a symlink',
    );
    expect(() => checkMentionsAt(prompt('see @sub/../a.txt'), scope({ judgedAsWritten: true }))).not.toThrow();
  });

  it('the gateway: more than MAX_MENTIONS mentions is INVALID_ARGUMENT; ask rules refuse like deny; a mention deeper than 64 folders in a session without cwd is refused', () => {
    const many = Array.from({ length: MAX_MENTIONS + 1 }, (_, i) => `@f${i}`).join(' ');
    expect(thrown(() => mentionsInContent(many))?.code).toBe('INVALID_ARGUMENT');
    expect(mentionsInContent('@x '.repeat(MAX_MENTIONS))).toEqual(['x']);
    const policy = Policy.compile({ permissions: { ask: ['Read(//etc/**)'], deny: ['Read(./secrets/)'] } });
    expect(thrown(() => checkMentions(policy, prompt('see @/etc/passwd'), '/w'))?.message).toContain(
      'ask rule covers it (policy rule: Read(//etc/**))',
    );
    expect(thrown(() => checkMentions(policy, prompt('list @secrets/'), '/w'))?.message).toContain('Read(./secrets/)'); // the folder's listing
    expect(() => checkMentions(policy, prompt('see @docs/secrets.md'), '/w')).not.toThrow();
    expect(thrown(() => checkMentions(policy, prompt(`see @/${'d/'.repeat(65)}x`), undefined))?.code).toBe('INVALID_ARGUMENT');
  });
});
