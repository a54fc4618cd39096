import { Agent } from '../../agent/agent.js';
import type { EngineChoice } from '../../agent/engine-command.js';
import { TetherError } from '../../core/errors.js';
import { createLogger } from '../../core/logging.js';
import { pick, required, type Command } from '../args.js';
import { onShutdown } from '../shutdown.js';

export function engineChoice(value: unknown): EngineChoice {
  const v = (value as string | undefined) ?? process.env.TETHER_ENGINE ?? 'auto';
  if (v !== 'auto' && v !== 'claude' && v !== 'demo') throw new TetherError('INVALID_ARGUMENT', `--engine must be auto, claude or demo, got "${v}"`);
  return v;
}

export const agentCommand: Command = {
  name: 'agent',
  summary: 'run an agent that dials out to a gateway and runs engines',
  usage: `Usage: tether agent --gateway ws://HOST:PORT --name NAME [--token TOKEN] [--engine auto|claude|demo]
                    [--engine-command PATH] [--cwd DIR] [--label KEY=VALUE]...

Runs on the build machine. Dials out (no open port needed), registers as NAME and spawns one
engine per session. Reconnects by itself; engines keep running while the link is down.

Options:
  --gateway URL          gateway URL (env TETHER_GATEWAY)
  --name NAME            agent name (env TETHER_AGENT; default: this host's name)
  --token TOKEN          agent token (env TETHER_TOKEN)
  --engine KIND          auto (default: claude if on PATH, else demo), claude or demo
  --engine-command PATH  the Claude Code executable (env TETHER_ENGINE_COMMAND; default claude)
  --cwd DIR              working folder for sessions that name none (default: current folder)
  --label KEY=VALUE      label shown in "tether agents" (repeatable)
  --log-level LEVEL      trace|debug|info|warn|error (default info)
  -h, --help             show this help`,
  options: {
    gateway: { type: 'string' },
    name: { type: 'string' },
    token: { type: 'string' },
    engine: { type: 'string' },
    'engine-command': { type: 'string' },
    cwd: { type: 'string' },
    label: { type: 'string', multiple: true },
    'log-level': { type: 'string' },
  },
  async run(v) {
    const logger = createLogger({ name: 'agent', level: v['log-level'] as string | undefined });
    const labels: Record<string, string> = {};
    for (const l of (v.label as string[] | undefined) ?? []) {
      const i = l.indexOf('=');
      if (i <= 0) throw new TetherError('INVALID_ARGUMENT', `--label must be KEY=VALUE, got "${l}"`);
      labels[l.slice(0, i)] = l.slice(i + 1);
    }
    const name = pick(v.name, 'TETHER_AGENT', (await import('node:os')).hostname())!;
    let started = false;
    const agent = new Agent({
      gateway: required(pick(v.gateway, 'TETHER_GATEWAY'), '--gateway (or TETHER_GATEWAY)'),
      name,
      token: pick(v.token, 'TETHER_TOKEN'),
      engine: engineChoice(v.engine),
      engineCommand: pick(v['engine-command'], 'TETHER_ENGINE_COMMAND'),
      cwd: v.cwd as string | undefined,
      labels,
      logger,
      onStatus: (s) => {
        if (s.state === 'connected') process.stderr.write(`agent ${name}: connected to ${s.hello.gateway_id}\n`);
        if (s.state === 'down') process.stderr.write(`agent ${name}: link down (${s.error.message}); retrying in ${s.retryInMs} ms\n`);
        if (s.state === 'closed' && s.error && started) {
          // Not retryable (token refused, or another agent took over the name): stop for good.
          process.stderr.write(`agent ${name}: giving up: ${s.error.message}\n`);
          void agent.shutdown().then(() => process.exit(1));
        }
      },
    });
    process.stdout.write(`agent: ${name} engine: ${agent.engines.explanation}\n`);
    await agent.start();
    started = true;
    await onShutdown(() => agent.shutdown());
    return 0;
  },
};
