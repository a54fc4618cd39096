import { describe, expect, it } from 'vitest';
import { parseCommand, type Command } from '../bin/args.js';
import { agentCommand } from '../bin/commands/agent.js';
import { gatewayCommand } from '../bin/commands/gateway.js';
import { upCommand } from '../bin/commands/up.js';
import { UP_CONFIG } from '../bin/up-config.js';
import { AGENT_CONFIG } from '../agent/config.js';
import { keysOf } from '../core/config/keys.js';
import { GATEWAY_CONFIG } from '../gateway/config.js';
import { runTether } from './support/cli.js';

/**
 * Every flag form the --help of tether up, gateway and agent documents is taken by the parser
 * as shown: a switch without a value, a valued flag as `--flag VALUE` and as `--flag=VALUE`.
 */
const PROGRAMS: Command[] = [upCommand, gatewayCommand, agentCommand];

/** One documented flag: its name and its value placeholder (absent: a switch). */
interface DocumentedFlag {
  flag: string;
  placeholder?: string;
}

/** The flags of a usage text's "Options:" section, each line's head up to the description. */
function documentedFlags(usage: string): DocumentedFlag[] {
  const section = usage.split('\nOptions:\n')[1]?.split('\n\n')[0];
  if (!section) throw new Error('the usage has no Options: section');
  const out: DocumentedFlag[] = [];
  for (const line of section.split('\n')) {
    if (!/^ {2}-/.test(line)) continue; // a continuation of the line before
    // The head ends at the gap before the description, or at ": " ("..., --engine-user NAME: as for tether agent").
    const head = line.trim().split(/ {2,}|: /)[0];
    for (const item of head.split(', ')) {
      const m = /^--([a-z][a-z-]*)(?: (\S+))?$/.exec(item);
      if (m) out.push({ flag: m[1], placeholder: m[2] });
      else if (item !== '-h') throw new Error(`cannot read the flag "${item}" in: ${line}`);
    }
  }
  return out;
}

/** A value the placeholder stands for: the first of `on|off`, a port, else any text. */
function sampleValue(placeholder: string): string {
  if (placeholder.includes('|')) return placeholder.split('|')[0];
  if (placeholder === 'PORT') return '0';
  if (placeholder.includes('=')) return 'K=V';
  return 'x';
}

describe('program flags as their --help shows them', () => {
  it.each(PROGRAMS.map((c) => [c.name, c] as const))('tether %s takes every documented flag form', (_name, cmd) => {
    const flags = documentedFlags(cmd.usage);
    expect(flags.length).toBeGreaterThan(8);
    const refused: string[] = [];
    const tryForm = (argv: string[]) => {
      try {
        parseCommand(cmd, argv);
      } catch (err) {
        refused.push(`${argv.join(' ')}: ${(err as Error).message.split('\n')[0]}`);
      }
    };
    for (const { flag, placeholder } of flags) {
      if (placeholder === undefined) tryForm([`--${flag}`]);
      else {
        tryForm([`--${flag}`, sampleValue(placeholder)]);
        tryForm([`--${flag}=${sampleValue(placeholder)}`]);
      }
    }
    tryForm(['-h']);
    expect(refused).toEqual([]);
  });

  it('each documented switch turns its key on (tether config --print, which loads as the program does)', async () => {
    const specs = { up: UP_CONFIG.schema, gateway: GATEWAY_CONFIG.schema, agent: AGENT_CONFIG.schema } as Record<
      string,
      Parameters<typeof keysOf>[0]
    >;
    const required: Record<string, string[]> = { up: [], gateway: [], agent: ['--gateway', 'ws://127.0.0.1:1', '--name', 'n'] };
    let checked = 0;
    for (const cmd of PROGRAMS) {
      const switches = documentedFlags(cmd.usage).filter((f) => f.placeholder === undefined && f.flag !== 'help');
      if (!switches.length) continue;
      const r = await runTether(
        ['config', '--print', '--json', '--program', cmd.name, ...required[cmd.name], ...switches.map((s) => `--${s.flag}`)],
        {
          env: { TETHER_CONFIG: '', TETHER_GATEWAY: '', TETHER_AGENT: '', TETHER_TOKEN: '' },
        },
      );
      expect(r.stderr, `tether config --print --program ${cmd.name}`).toBe('');
      expect(r.code).toBe(0);
      const config = JSON.parse(r.stdout) as Record<string, unknown>;
      for (const s of switches) {
        const key = keysOf(specs[cmd.name]).find((k) => k.flag === s.flag);
        expect(key, `--${s.flag} is a configuration key of ${cmd.name}`).toBeDefined();
        expect(config[key!.name], `${cmd.name} --${s.flag}`).toBe(true);
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(2); // up and agent document --allow-bypass-permissions
  });
});
