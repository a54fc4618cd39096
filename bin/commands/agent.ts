import { readTokenFile } from '../../core/auth/token-file.js';
import { startTelemetry } from '../../core/telemetry/telemetry.js';
import { Agent } from '../../agent/agent.js';
import { EngineSet } from '../../agent/engine-set.js';
import { standardDialers } from '../../core/link/dial.js';
import { AGENT_CONFIG, enginePoliciesOf } from '../../agent/config.js';
import { hostKeyFingerprint, hostKeyProof, loadOrCreateHostKey } from '../../core/auth/host-key.js';
import { dialTlsOf } from '../../core/config/tls-keys.js';
import { programCommand } from '../program-command.js';
import { onShutdown } from '../shutdown.js';

export const agentCommand = programCommand(
  AGENT_CONFIG,
  {
    name: 'agent',
    loggerName: 'agent',
    summary: 'run an agent that dials out to a gateway and runs engines',
    usage: `Usage: tether agent --gateway ws://HOST:PORT[,URL...] --name NAME [--token TOKEN] [--engine auto|claude|demo]
                    [--engine-command PATH] [--cwd DIR] [--label KEY=VALUE]... [--config FILE]
                    [--allow-engine-flag FLAG]... [--allow-engine-control SUBTYPE]...
                    [--engine-env KEY=VALUE]... [--engine-user NAME]

Runs on the build machine. Dials out (no open port needed), registers as NAME and spawns one
engine per session. Reconnects by itself; engines keep running while the link is down.
With several gateways (one cluster) it fails over: each retry dials the next URL, registers
there and resumes its sessions.

Options:
  --config FILE          configuration file, JSON or YAML (env TETHER_CONFIG); see below
  --gateway URL          gateway URL (env TETHER_GATEWAY); repeatable or comma-separated:
                         gateways of one cluster, tried in turn when the link drops
  --name NAME            agent name (env TETHER_AGENT; default: this host's name)
  --token TOKEN          agent token (env TETHER_TOKEN)
  --token-file FILE      read the agent token from FILE (env TETHER_TOKEN_FILE)
  --engine KIND          repeatable, the first is the default: auto (claude if on PATH, else
                         demo), claude, demo, acp (an ACP agent at --engine-command), or an
                         ACP preset: opencode, gemini, codex, claude-acp (README, "Other agents")
  --engine-command PATH  the Claude Code executable (env TETHER_ENGINE_COMMAND; default claude);
                         with --engine acp, the ACP agent's command line, e.g. "opencode acp"
  --cwd DIR              working folder for sessions that name none (default: current folder)
  --session-root DIR     sessions may work only in DIR and below (repeatable; default: anywhere)
  --mention-root DIR     a prompt's @-mentions may also name files in DIR and below (repeatable;
                         / for anywhere); default: only the session folder and session roots
  --label KEY=VALUE      label shown in "tether agents" (repeatable)
  --allow-engine-flag FLAG  let sessions use an engine flag that runs programs, loads code or
                         settings, or reaches files beyond the session folder (repeatable,
                         e.g. mcp-config; default: none of them)
  --allow-engine-control SUBTYPE  let a session's owner send an engine control request that
                         starts programs, loads code or settings, changes the engine's
                         environment or writes settings files (repeatable, e.g. mcp_set_servers;
                         default: none of them; core/engine-controls.ts lists them)
  --allow-bypass-permissions  let sessions run tools without asking (bypassPermissions)
  --engine-env KEY=VALUE  add a variable to every engine's environment (repeatable)
  --engine-env-deny GLOB  withhold matching variables from engines (repeatable; TETHER_* and
                         the agent token are always withheld)
  --engine-user NAME     run engines as this OS user (the agent must be root or hold CAP_SETUID)
  --host-key-file FILE   the agent's host key, made on first run (default ~/.tether/agent-host-key.pem;
                         off: none); the gateway pins it at the first hello
  --log-level LEVEL      trace|debug|info|warn|error (default info)
  --log-format F         auto|json|pretty (default auto: pretty on a terminal)
  -h, --help             show this help`,
  },
  async (c, root) => {
    const logger = root.child({ agent: c.name });
    const name = c.name;
    let started = false;
    const hostKey = c.hostKeyFile === null ? undefined : loadOrCreateHostKey(c.hostKeyFile);
    const agent = new Agent({
      telemetry: await startTelemetry('tether-agent'),
      gateway: c.gateway,
      name,
      token: c.token,
      tokenSource: c.tokenFile === undefined ? undefined : () => readTokenFile(c.tokenFile!),
      engine: c.engine,
      engineCommand: c.engineCommand,
      cwd: c.cwd,
      labels: c.labels,
      initializeTimeoutMs: c.initializeTimeoutMs,
      eofGraceMs: c.engineEofGraceMs,
      termGraceMs: c.engineTermGraceMs,
      ...enginePoliciesOf(c),
      hostKey: hostKey?.key,
      heartbeat: { intervalMs: c.heartbeatIntervalMs, timeoutMs: c.heartbeatTimeoutMs },
      dial: dialTlsOf(c),
      dialers: standardDialers(),
      engineSet: EngineSet.killedOnExit(),
      logger,
      onStatus: (s) => {
        const several = Array.isArray(c.gateway);
        if (s.state === 'connected')
          process.stderr.write(`agent ${name}: connected to ${s.hello.gateway_id}${several ? ` at ${s.url}` : ''}\n`);
        if (s.state === 'down')
          process.stderr.write(
            `agent ${name}: link down (${s.error.message}); retrying${several ? ` ${s.nextUrl}` : ''} in ${s.retryInMs} ms\n`,
          );
        if (s.state === 'closed' && s.error && started) {
          // Not retryable (token refused, or another agent took over the name): stop for good.
          process.stderr.write(`agent ${name}: giving up: ${s.error.message}\n`);
          void agent.shutdown().then(() => process.exit(1));
        }
      },
    });
    process.stdout.write(`agent: ${name} engine: ${agent.engines.explanation}\n`);
    if (hostKey && c.hostKeyFile)
      process.stdout.write(
        `host key: ${hostKeyFingerprint(hostKeyProof(hostKey.key, name).public_key)} (${c.hostKeyFile}${hostKey.created ? ', created now' : ''})\n`,
      );
    await agent.start();
    started = true;
    await onShutdown(() => (c.drainMs === undefined ? agent.shutdown() : agent.drain(c.drainMs)));
    return 0;
  },
);
