import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mentionsInContent } from '../core/policy/mentions.js';
import {
  claudeTestEnv,
  initializeClaude,
  makeTempDir,
  spawnClaude,
  STREAM_JSON_ARGS,
  userMessage,
  type ClaudeProcess,
  type TempDir,
} from './support/claude-cli.js';
import { startFakeAnthropic, type FakeAnthropic } from './support/fake-anthropic.js';

/**
 * Which @-mentions the real CLI reads into a stream-json prompt without a tool call
 * (docs/engine-protocol.md, "@-mentions"), and that core/policy/mentions.ts finds each one it
 * reads. Every case mentions a file of its own, holding a marker: the CLI does not send a file
 * it already sent unchanged, and the fake model records what reached it.
 */
const textBlocks = (...texts: string[]) => ({
  type: 'user',
  message: { role: 'user', content: texts.map((text) => ({ type: 'text', text })) },
  parent_tool_use_id: null,
  session_id: 'default',
});

/** [case, the prompt (given the project, outside and home folders), read into the prompt?, what mentionsInContent finds]. */
type Case = [
  string,
  (d: { proj: string; out: string }) => string | object,
  boolean,
  string[] | ((d: { proj: string; out: string }) => string[]),
];
const CASES: Case[] = [
  ['@file', () => 'summarise @plain.txt please', true, ['plain.txt']],
  ['@./relative', () => 'summarise @./dot.txt', true, ['./dot.txt']],
  ['@.env (a dot file)', () => 'summarise @.env', true, ['.env']],
  ['@/absolute, outside the folder', (d) => `summarise @${d.out}/abs.txt`, true, (d) => [`${d.out}/abs.txt`]],
  ['@../ out of the folder', (d) => `see @../${basename(d.out)}/up.txt now`, true, (d) => [`../${basename(d.out)}/up.txt`]],
  ["@~/ (the engine's HOME)", () => 'summarise @~/home.txt', true, ['~/home.txt']],
  ['@"a path with spaces"', () => 'summarise @"with space.txt" please', true, ['with space.txt']],
  ['@file#L2-3 (a line range)', () => 'summarise @lines.txt#L2-3', true, ['lines.txt']],
  ['@"quoted"#L1-1', () => 'summarise @"qrange.txt"#L1-1', true, ['qrange.txt']],
  ['a symlink leading out', () => 'summarise @link.txt', true, ['link.txt']],
  ['trailing punctuation', () => 'look at @comma.txt, then @stop.txt.', true, ['comma.txt', 'stop.txt']],
  ['at the start, after a tab, after a newline', () => '@start.txt\t@tab.txt\n@nl.txt', true, ['start.txt', 'tab.txt', 'nl.txt']],
  ['in the second text block', () => textBlocks('hi', 'see @block.txt'), true, ['block.txt']],
  ['@dir/ (listed, not read)', () => 'see @listed/ ok', true, ['listed']],
  ['mid-word (an e-mail address)', () => 'mail foo@word.txt please', false, []],
  ['after "(" or a quote (code such as from \'@/lib\')', () => "look (@paren.txt) and '@paren.txt'", false, []],
  ['@file:///URI', (d) => `look at @file://${d.out}/uri.txt`, false, (d) => [`file://${d.out}/uri.txt`]],
  [
    "@server:uri (a connected MCP server's resource: not read in stream-json mode)",
    () => 'look at @memo:memo://note',
    false,
    ['memo:memo://note'],
  ],
  ['an escaped space (cut there, like trailing punctuation)', () => 'see @esc\\ aped.txt', false, ['esc']],
];
const MARKED = [
  'plain.txt',
  'dot.txt',
  '.env',
  'with space.txt',
  'qrange.txt',
  'comma.txt',
  'stop.txt',
  'start.txt',
  'tab.txt',
  'nl.txt',
  'block.txt',
  'word.txt',
  'paren.txt',
  'esc aped.txt',
];

const marker = (name: string) => `MARK_${name.replace(/[^a-z0-9]/gi, '_').toUpperCase()}`;

describe('@-mentions the CLI reads into a stream-json prompt', () => {
  let fake: FakeAnthropic;
  let cli: ClaudeProcess;
  const dirs: TempDir[] = [];
  const d = { proj: '', out: '' };
  beforeAll(async () => {
    const [proj, out, home] = ['tether-forms-proj-', 'tether-forms-out-', 'tether-forms-home-'].map((p) => makeTempDir(p));
    dirs.push(proj, out, home);
    Object.assign(d, { proj: proj.path, out: out.path });
    for (const name of MARKED) writeFileSync(join(proj.path, name), `${marker(name)}\n`);
    for (const name of ['abs.txt', 'up.txt', 'uri.txt', 'target.txt']) writeFileSync(join(out.path, name), `${marker(name)}\n`);
    writeFileSync(join(home.path, 'home.txt'), `${marker('home.txt')}\n`);
    writeFileSync(join(proj.path, 'lines.txt'), 'MARK_L1\nMARK_L2\nMARK_L3\nMARK_L4\n');
    symlinkSync(join(out.path, 'target.txt'), join(proj.path, 'link.txt'));
    mkdirSync(join(proj.path, 'listed'));
    writeFileSync(join(proj.path, 'listed', 'inside-listed.txt'), 'not read\n');
    fake = await startFakeAnthropic({ responses: [] });
    const mcp = {
      mcpServers: {
        memo: {
          command: process.execPath,
          args: [fileURLToPath(new URL('./support/mcp-resource-server.mjs', import.meta.url)), 'MARK_MCP_RESOURCE'],
        },
      },
    };
    cli = spawnClaude({
      cwd: proj.path,
      env: claudeTestEnv({ home: home.path, baseUrl: fake.url }),
      args: [...STREAM_JSON_ARGS, '--mcp-config', JSON.stringify(mcp)],
    });
    await initializeClaude(cli);
  });
  afterAll(async () => {
    await cli?.kill();
    await fake?.close();
    for (const dir of dirs) dir.cleanup();
  });

  /** Sends one prompt and returns the last message of every request its turn made (the history holds earlier turns' files). */
  async function turn(prompt: string | object): Promise<string> {
    const before = fake.requests.length;
    const from = cli.frames.length;
    cli.send(typeof prompt === 'string' ? userMessage(prompt) : prompt);
    await cli.waitFor((f) => f.type === 'result', 60_000, from);
    return fake.requests
      .slice(before)
      .map((r) => JSON.stringify(r.lastMessage ?? null))
      .join('\n');
  }

  // One CLI for all cases, in order (sequential by default within a file).
  it.each(CASES)('%s', async (_, prompt, read, found) => {
    const p = prompt(d);
    const sent = await turn(p);
    const text = typeof p === 'string' ? p : (p as { message: { content: unknown } }).message.content;
    const expected = typeof found === 'function' ? found(d) : found;
    expect(mentionsInContent(text)).toEqual(expected);
    const marks = sent.match(/MARK_[A-Z0-9_]+/g) ?? [];
    if (expected[0] === 'listed')
      expect(sent).toContain('inside-listed.txt'); // the folder's names, not its files' text
    else if (read) expect(marks.length).toBeGreaterThan(0);
    else expect(marks).toEqual([]);
    if (expected[0]?.startsWith('memo:')) {
      const init = [...cli.frames].reverse().find((f) => f.type === 'system' && f.subtype === 'init');
      expect(init?.mcp_servers).toContainEqual(expect.objectContaining({ name: 'memo', status: 'connected' })); // the server was there to read from
    }
    if (expected[0] === 'lines.txt') expect([...new Set(marks)]).toEqual(['MARK_L2', 'MARK_L3']);
  });
});
