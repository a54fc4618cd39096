/**
 * Our agent as a bench child: dials the gateway (ws:// or grpc://), registers as `--name`
 * and runs `--engine` (default: bench/echo-engine.mjs) for every session. Engines are its
 * children and die with it (the engine set's exit hook kills their process groups). Traces
 * when the OTEL_* variables it was started with ask for it, as `tether agent` does.
 */
import { fileURLToPath } from 'node:url';
import { Agent } from '../../dist/agent/agent.js';
import { EngineSet } from '../../dist/agent/engine-set.js';
import { startTelemetry } from '../../dist/core/telemetry/telemetry.js';
import { argsOf, serve } from '../lib/child.mjs';

const a = argsOf();
const engineCommand = a.engine ?? fileURLToPath(new URL('../echo-engine.mjs', import.meta.url));
const agent = new Agent({
  telemetry: await startTelemetry('tether-agent'),
  gateway: a.gateway,
  name: a.name ?? 'bench',
  engine: 'claude',
  engineCommand,
  cwd: process.cwd(),
  eofGraceMs: 500,
  termGraceMs: 500,
  // Engines are this child's too: killed with it (its exit hook kills their process groups).
  engineSet: EngineSet.killedOnExit(),
});
await agent.start();
const { ready } = serve({ stats: () => ({ sessions: agent.sessionCount }) }, { onExit: () => agent.shutdown(1_000) });
ready({ name: a.name ?? 'bench' });
