import { execFileSync } from 'node:child_process';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultModeArgs, engineCommandLine, STREAM_JSON_FLAGS, type ResolvedEngines } from '../agent/engine-command.js';
import { checkExtraArgs, type EngineFlagPolicy } from '../agent/extra-args.js';
import { ENGINE_FLAGS, engineFlag, isUnknownToken, readEngineArgv, type ParsedFlag } from '../core/engine-flags.js';
import { asTetherError } from '../core/errors.js';
import { SessionOptions } from '../core/protocol/session-options.js';
import { claudeBinaryPath, makeTempDir } from './support/claude-cli.js';
import { thrownBy } from './support/thrown.js';

/**
 * core/engine-flags.ts against the real CLI's arity, and the agent's argv builder: every
 * SessionOptions value reaches the CLI as the value of its own flag (issue 13, finding 1).
 */
const ENGINES: ResolvedEngines = { engines: ['claude'], defaultEngine: 'claude', claudeCommand: '/usr/bin/claude', explanation: 'test' };

/** The agent's whole engine argv for these options (what agent.spawn builds), or the refusal. */
function argvFor(o: SessionOptions, policy: EngineFlagPolicy = {}): string[] {
  const extra = checkExtraArgs(o.extra_args ?? [], policy, 'test-agent');
  return engineCommandLine('claude', ENGINES, o, extra, policy, 'test-agent').args;
}

describe("the flag table is the CLI's own", () => {
  it('every flag `claude --help` shows has the arity the table gives it', () => {
    const home = makeTempDir('tether-help-');
    try {
      const help = execFileSync(claudeBinaryPath(), ['--help'], {
        env: { PATH: process.env.PATH, HOME: home.path },
        encoding: 'utf8',
        timeout: 30_000,
      });
      const seen: string[] = [];
      for (const m of help.matchAll(/^ {2}((?:-\w, )?--[\w-]+(?:, --[\w-]+)?)(?: ([<[][^>\]]+[>\]]))?/gm)) {
        const spellings = m[1].split(', ');
        const arg = m[2];
        const arity = arg === undefined ? 'none' : arg.startsWith('[') ? 'optional' : arg.endsWith('...>') ? 'variadic' : 'value';
        for (const s of spellings) {
          const flag = engineFlag(s);
          if (!flag) continue; // a flag Tether does not know is refused, whatever its arity
          seen.push(s);
          expect(flag.arity, `${s} in claude --help: ${m[0].trim()}`).toBe(arity);
        }
      }
      // The check ran over the flags that matter most.
      expect(seen).toEqual(
        expect.arrayContaining([
          '--resume',
          '-r',
          '--mcp-config',
          '--add-dir',
          '--allowedTools',
          '--model',
          '--debug',
          '--debug-file',
          '--settings',
          '--plugin-dir',
        ]),
      );
    } finally {
      home.cleanup();
    }
  }, 40_000);

  it("every flag, hidden ones included, has the arity of the CLI's own argv scanner", () => {
    const sets = cliScannerSets(claudeBinaryPath());
    // The scanner's tables, found by what they hold: flags with a value (variadic ones too),
    // variadic flags, flags with an optional value, flags without a value.
    const value = sets.find((s) => s.includes('--debug-file') && s.includes('--model'));
    const variadic = sets.find((s) => s.includes('--add-dir') && s.includes('--mcp-config') && !s.includes('--model'));
    const optional = sets.find((s) => s.includes('-r') && s.includes('--resume'));
    const none = sets.find((s) => s.includes('--verbose') && s.includes('--continue'));
    expect(
      [value, variadic, optional, none].every(Boolean),
      "the CLI's argv scanner tables were not found: check this CLI release by hand",
    ).toBe(true);
    for (const flag of ENGINE_FLAGS) {
      for (const spelling of [flag.name, ...(flag.aliases ?? [])]) {
        const cli = variadic!.includes(spelling)
          ? 'variadic'
          : optional!.includes(spelling)
            ? 'optional'
            : value!.includes(spelling)
              ? 'value'
              : none!.includes(spelling)
                ? 'none'
                : 'unknown to the CLI';
        expect(cli, spelling).toBe(flag.arity);
      }
    }
  });

  it('reads an optional value only when the next token does not look like a flag', () => {
    const items = [...readEngineArgv(['--resume', '--debug-file=/tmp/x', '-r', 'abc', '--add-dir', '/a', '/b', '--model', '--x'])];
    const flags = items.map((i) => (isUnknownToken(i) ? `?${i.token}` : `${i.flag.name}=${i.value ?? ''}`));
    expect(flags).toEqual(['--resume=', '--debug-file=/tmp/x', '--resume=abc', '--add-dir=/a', '--add-dir=/b', '--model=--x']);
  });

  it('names each flag once, with a class', () => {
    const names = ENGINE_FLAGS.flatMap((f) => [f.name, ...(f.aliases ?? [])]);
    expect(new Set(names).size).toBe(new Set(ENGINE_FLAGS.map((f) => f.name)).size + ENGINE_FLAGS.flatMap((f) => f.aliases ?? []).length);
  });
});

/**
 * The string sets next to the CLI's eager argv scanner (the code that reads flags before
 * commander runs), from the binary itself: found by a flag only they name, read in chunks.
 */
function cliScannerSets(binary: string): string[][] {
  const marker = Buffer.from('"--prefill","--prefill-b64"');
  const fd = openSync(binary, 'r');
  try {
    const size = fstatSync(fd).size;
    const chunk = Buffer.alloc(16 << 20);
    for (let pos = 0; pos < size; pos += chunk.length - marker.length) {
      const i = chunk.subarray(0, readSync(fd, chunk, 0, chunk.length, pos)).indexOf(marker);
      if (i < 0) continue;
      const window = Buffer.alloc(16_000);
      const text = window.subarray(0, readSync(fd, window, 0, window.length, Math.max(0, pos + i - 100))).toString('latin1');
      return [...text.matchAll(/new Set\(\[([^\]]*)\]/g)].map((m) => [...m[1].matchAll(/"([^"]+)"/g)].map((x) => x[1]));
    }
    return [];
  } finally {
    closeSync(fd);
  }
}

describe('extra_args: the owner decides, the client asks', () => {
  const denied: [string, string[]][] = [
    [
      'an MCP server that is a command',
      ['--mcp-config', JSON.stringify({ mcpServers: { x: { command: 'sh', args: ['-c', 'id > /tmp/p'] } } })],
    ],
    ['an MCP server over HTTP', ['--mcp-config={"mcpServers":{"x":{"type":"http","url":"http://169.254.169.254/"}}}']],
    ['an MCP config file', ['--mcp-config', '/etc/mcp.json']],
    ['bypassPermissions', ['--permission-mode', 'bypassPermissions']],
    ['--dangerously-skip-permissions', ['--dangerously-skip-permissions']],
    ['--allow-dangerously-skip-permissions', ['--allow-dangerously-skip-permissions']],
    ['--add-dir /', ['--add-dir', '/']],
    ['--settings', ['--settings={"hooks":{}}']],
    ['--plugin-dir', ['--plugin-dir', '/tmp/plugin']],
    ['--debug-file', ['--debug-file', '/tmp/x']],
    ['--agents', ['--agents', '{}']],
    ["--setting-sources= (drops the owner's own settings: their deny rules and hooks)", ['--setting-sources=']],
    ['--setting-sources project', ['--setting-sources', 'project']],
  ];
  it.each(denied)('refuses %s by default with PERMISSION_DENIED naming the flag', (_what, args) => {
    const err = thrownBy(() => checkExtraArgs(args, {}, 'buildbox'));
    expect(err?.code).toBe('PERMISSION_DENIED');
    expect(err?.message).toContain(`"${args[0].split('=')[0]}"`);
    expect(err?.message).toContain('buildbox');
  });

  it('allows what the Agent SDK passes for in-process MCP servers, and the safe flags, as --flag=value', () => {
    const sdk = JSON.stringify({ mcpServers: { tools: { type: 'sdk', name: 'tools' } } });
    expect(
      checkExtraArgs([
        '--mcp-config',
        sdk,
        '--setting-sources=user,project,local',
        '--max-turns',
        '3',
        '--allowed-tools',
        'Read',
        'Bash(git *)',
        '--strict-mcp-config',
        '-r',
        'abc',
      ]),
    ).toEqual([
      `--mcp-config=${sdk}`,
      '--setting-sources=user,project,local',
      '--max-turns=3',
      '--allowedTools=Read',
      '--allowedTools=Bash(git *)',
      '--strict-mcp-config',
      '--resume=abc',
    ]);
  });

  it('lets the owner allow more: --allow-engine-flag, --allow-bypass-permissions', () => {
    const policy: EngineFlagPolicy = { allowFlags: ['--add-dir', '--mcp-config'], allowBypassPermissions: true };
    expect(checkExtraArgs(['--add-dir', '/', '--permission-mode', 'bypassPermissions', '--mcp-config', '/etc/mcp.json'], policy)).toEqual([
      '--add-dir=/',
      '--permission-mode=bypassPermissions',
      '--mcp-config=/etc/mcp.json',
    ]);
    expect(thrownBy(() => argvFor({ permission_mode: 'bypassPermissions' }))?.code).toBe('PERMISSION_DENIED');
    expect(argvFor({ permission_mode: 'bypassPermissions' }, policy)).toContain('--permission-mode=bypassPermissions');
  });

  it('refuses unknown flags, stray values and misused flags with INVALID_ARGUMENT', () => {
    for (const args of [['--nope'], ['stray'], ['--'], ['--continue=yes'], ['--model'], ['-pr']]) {
      expect(thrownBy(() => checkExtraArgs(args))?.code, JSON.stringify(args)).toBe('INVALID_ARGUMENT');
    }
  });

  it("drops the agent's own plumbing a client repeats", () => {
    expect(checkExtraArgs(['-p', '--verbose', '--output-format', 'stream-json', '--permission-prompt-tool=stdio', '--model', 'm'])).toEqual(
      ['--model=m'],
    );
  });
});

describe('session options are data, never flags', () => {
  it('passes resume = "--debug-file=/tmp/x" as the value of --resume', () => {
    const args = argvFor({ resume: '--debug-file=/tmp/x' });
    expect(args).toContain('--resume=--debug-file=/tmp/x');
    expect(args.filter((a) => a.startsWith('--debug-file'))).toEqual([]);
  });

  it('refuses a value that cannot be one argv string', () => {
    expect(thrownBy(() => argvFor({ model: 'a\0b' }))?.code).toBe('INVALID_ARGUMENT');
    expect(thrownBy(() => argvFor({ system_prompt: 'x'.repeat(200_000) }))?.code).toBe('INVALID_ARGUMENT');
  });

  // Strings a hostile client would try: flag-looking, =, blanks, newlines, NUL, 100 KB.
  const nasty = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom(
      '-',
      '--',
      '-p',
      '--debug-file=/tmp/x',
      '--resume',
      '--mcp-config',
      '=',
      '==',
      ' ',
      '\n',
      '\0',
      '-r',
      '--add-dir=/',
      'bypassPermissions',
    ),
    fc.string({ maxLength: 30 }).map((s) => `-${s}`),
    fc.string({ maxLength: 30 }).map((s) => `--${s}`),
    fc.tuple(fc.constantFrom('', '-', '--x=', '\n', '\0'), fc.integer({ min: 1, max: 100_000 })).map(([p, n]) => p + 'y'.repeat(n)),
  );
  const flagSpellings = ENGINE_FLAGS.flatMap((f) => [f.name, ...(f.aliases ?? [])]);
  const extraToken = fc.oneof(
    fc.constantFrom(...flagSpellings),
    fc.tuple(fc.constantFrom(...flagSpellings), nasty).map(([f, v]) => `${f}=${v}`),
    nasty,
  );
  const options = fc.record(
    {
      cwd: fc.string({ minLength: 1, maxLength: 50 }),
      model: fc.oneof(nasty, fc.constant('m')),
      permission_mode: fc.constantFrom('default', 'acceptEdits', 'auto', 'bypassPermissions', 'dontAsk', 'plan', 'manual'),
      allowed_tools: fc.array(fc.oneof(nasty, fc.constant('Bash')), { maxLength: 3 }),
      disallowed_tools: fc.array(nasty, { maxLength: 3 }),
      resume: nasty,
      system_prompt: nasty,
      append_system_prompt: nasty,
      include_partial_messages: fc.boolean(),
      extra_args: fc.array(extraToken, { maxLength: 8 }),
    },
    { requiredKeys: [] },
  );

  it("property: the engine argv names no flag the client did not name, and each value is its own flag's", () => {
    let built = 0;
    fc.assert(
      fc.property(options, fc.boolean(), (raw, permissive) => {
        const parsed = SessionOptions.safeParse(raw);
        fc.pre(parsed.success); // the gateway refuses the rest before any agent sees it
        const o = parsed.data!;
        const policy: EngineFlagPolicy = permissive
          ? { allowFlags: ['--add-dir', '--mcp-config', '--settings', '--debug-file', '--plugin-dir'], allowBypassPermissions: true }
          : {};
        let args: string[];
        try {
          args = argvFor(o, policy);
        } catch (err) {
          expect(['INVALID_ARGUMENT', 'PERMISSION_DENIED']).toContain(asTetherError(err).code);
          return;
        }
        built++;
        // The flags the client named: one per option field, and those extra_args spell out.
        const named = new Set([
          '--model',
          '--permission-mode',
          '--allowedTools',
          '--disallowedTools',
          '--resume',
          '--system-prompt',
          '--append-system-prompt',
          '--include-partial-messages',
        ]);
        for (const item of readEngineArgv(o.extra_args ?? [])) if (!isUnknownToken(item)) named.add(item.flag.name);
        // The agent's own flags first (fixed tokens), then the client's.
        const own = [...STREAM_JSON_FLAGS, ...defaultModeArgs(o, checkExtraArgs(o.extra_args ?? [], policy))];
        expect(args.slice(0, own.length)).toEqual(own);
        const rest = args.slice(own.length);
        // Every token is a flag the client named, with any value glued on: nothing a raw argv
        // scan or commander could read as another flag.
        for (const token of rest) {
          expect(token.startsWith('--'), token.slice(0, 80)).toBe(true);
          expect(named.has(token.split('=')[0]), token.slice(0, 80)).toBe(true);
        }
        // Read back as the CLI reads it: every option value is the value of its own flag.
        const read = [...readEngineArgv(rest)];
        expect(read.some(isUnknownToken)).toBe(false);
        const valuesOf = (name: string) => (read as ParsedFlag[]).filter((i) => i.flag.name === name).map((i) => i.value);
        if (o.model) expect(valuesOf('--model')).toContain(o.model);
        if (o.resume) expect(valuesOf('--resume')).toContain(o.resume);
        if (o.system_prompt !== undefined) expect(valuesOf('--system-prompt')).toContain(o.system_prompt);
        if (o.append_system_prompt !== undefined) expect(valuesOf('--append-system-prompt')).toContain(o.append_system_prompt);
        if (o.allowed_tools?.length) expect(valuesOf('--allowedTools')).toContain(o.allowed_tools.join(','));
      }),
      { numRuns: 400 },
    );
    expect(built, 'argv built (not refused) in enough runs to mean something').toBeGreaterThan(50);
  });
});
