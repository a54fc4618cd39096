import { mkdirSync, writeFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { it } from 'vitest';
import { claudeTestEnv, initializeClaude, makeTempDir, spawnClaude, userMessage } from './support/claude-cli.js';
import { startFakeAnthropic } from './support/fake-anthropic.js';

it('probe', async () => {
  const fake = await startFakeAnthropic({ responses: [] });
  const home = makeTempDir('probe-home-');
  const proj = makeTempDir('probe-proj-');
  const out = makeTempDir('probe-out-');
  const w = (p: string, s: string) => writeFileSync(p, s);
  w(join(proj.path, 'note.txt'), 'MARK_NOTE\n');
  w(join(proj.path, 'rel.txt'), 'MARK_REL\n');
  w(join(proj.path, '.env'), 'MARK_ENV\n');
  w(join(out.path, 'abs.txt'), 'MARK_ABS\n');
  w(join(home.path, 'home.txt'), 'MARK_HOME\n');
  mkdirSync(join(proj.path, 'dir with space'));
  w(join(proj.path, 'dir with space', 'f.txt'), 'MARK_SPACE\n');
  mkdirSync(join(proj.path, 'sub'));
  w(join(proj.path, 'sub', 'inner.txt'), 'MARK_SUBDIR\n');
  w(join(proj.path, 'lines.txt'), Array.from({ length: 10 }, (_, i) => `MARK_LINE${i + 1}`).join('\n') + '\n');
  w(join(proj.path, 'blk.txt'), 'MARK_BLOCK\n');
  w(join(out.path, 'link-target.txt'), 'MARK_LINK\n');
  symlinkSync(join(out.path, 'link-target.txt'), join(proj.path, 'link.txt'));
  w(join(proj.path, 'q.txt'), 'MARK_QUOTED\n');
  w(join(proj.path, 'paren.txt'), 'MARK_PAREN\n');
  w(join(proj.path, 'end.txt'), 'MARK_END\n');
  w(join(proj.path, 'mid.txt'), 'MARK_MID\n');
  w(join(proj.path, 'up.txt'), 'MARK_UP\n');
  const cli = spawnClaude({ cwd: proj.path, env: claudeTestEnv({ home: home.path, baseUrl: fake.url }) });
  try {
    await initializeClaude(cli);
    for (const n of ['up2', 'start', 'tab', 'nl', 'comma', 'dot', 'two1', 'two2', 'blk2', 'qr', 'noslash/x', 'dup', 'esc', 'col']) {
      if (n.includes('/')) { mkdirSync(join(proj.path, 'noslash')); }
      w(join(n === 'up2' ? out.path : proj.path, n === 'up2' ? 'up2.txt' : `${n}.txt`), `MARK_${n.replace(/[^a-z0-9]/g, '').toUpperCase()}\n`);
    }
    w(join(proj.path, 'q r.txt'), 'MARK_QSPACE\n');
    w(join(out.path, 'uri.txt'), 'MARK_URI\n');
    w(join(proj.path, 'rel uri.txt'), 'MARK_RELURI\n');
    const cases: Array<[string, object]> = [
      ['file uri', userMessage(`look at @file://${out.path}/uri.txt now`)],
      ['quoted space', userMessage(`look at @"${proj.path}/rel uri.txt" now`)],
    ];
    for (const [name, msg] of cases) {
      const before = fake.requests.length;
      const from = cli.frames.length;
      cli.send(msg);
      await cli.waitFor((f) => f.type === 'result', 60_000, from);
      const raw = fake.requests.slice(before).map((r) => r.raw).join('\n');
      const marks = [...new Set(raw.match(/MARK_[A-Z0-9]+/g) ?? [])];
      const last = fake.requests.slice(before).filter((r) => r.stream).at(-1);
      console.log(`CASE ${name}: ${marks.join(',') || '(none)'}\n  last: ${JSON.stringify(last?.lastMessage).slice(0, 1500)}`);
    }
  } finally {
    await cli.kill();
    await fake.close();
    home.cleanup();
    proj.cleanup();
    out.cleanup();
  }
}, 600_000);
