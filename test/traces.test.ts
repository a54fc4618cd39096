/**
 * OpenTelemetry traces (issue 35): one turn driven by the library through gateway and agent to
 * the engine and back lands in an in-process OTLP/HTTP receiver as spans of the client, the
 * gateway and the agent under ONE trace id, parent to child hop by hop, with no prompt text
 * or tool input in any attribute; the engine gets the create's TRACEPARENT. With the real CLI
 * and the scripted model, and with the demo engine on both transports. Off (OTEL_SDK_DISABLED,
 * OTEL_TRACES_EXPORTER=none) the receiver gets nothing.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GatewayClient } from '../client/gateway-client.js';
import { startTelemetry, type ServiceName } from '../core/telemetry/telemetry.js';
import type { Telemetry } from '../core/telemetry/tracer.js';
import { cleanupsPerTest, type Cleanups } from './support/cleanups.js';
import { startRig } from './support/engines.js';
import type { FakeScenario } from './support/fake-anthropic.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.js';
import type { TransportName } from './support/stack.js';
import { readTurn } from './support/turns.js';
import { startClusterStack } from './support/cluster-stack.js';
import { hasTool } from './support/tools.js';
import { until } from './support/items.js';
import { waitFor } from './support/wait.js';

/** The three programs' tracing, exporting to `receiver` (or as `env` says). */
async function telemetries(
  cleanups: Cleanups,
  env: NodeJS.ProcessEnv,
): Promise<Record<'gateway' | 'agent' | 'client', Telemetry | undefined>> {
  const start = async (service: ServiceName) => {
    const t = await startTelemetry(service, env);
    if (t) cleanups.push(() => t.shutdown());
    return t;
  };
  return { gateway: await start('tether-gateway'), agent: await start('tether-agent'), client: await start('tether-client') };
}

const otlpEnv = (receiver: OtlpReceiver): NodeJS.ProcessEnv => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
});

/** Runs one turn: the prompt carries `marker`, the model calls Bash with it in the command, the client allows. */
async function oneTurn(
  cleanups: Cleanups,
  kind: 'claude' | 'demo',
  env: NodeJS.ProcessEnv,
  transports: { client: TransportName; agent: TransportName },
  marker: string,
): Promise<{ enginePid: () => number | undefined; traced: (Telemetry | undefined)[] }> {
  const t = await telemetries(cleanups, env);
  const scenario: FakeScenario = {
    responses: [
      {
        text: 'Let me run it.',
        tool_use: { id: 'toolu_01', name: 'Bash', input: { command: `echo ${marker} > made.txt`, description: 'write file' } },
      },
      { text: 'Done.' },
    ],
  };
  const rig = cleanups.own(
    await startRig(kind, scenario, {
      clientTransport: transports.client,
      agentTransport: transports.agent,
      telemetry: t.gateway,
      agentOptions: { telemetry: t.agent },
    }),
  );
  const client = await GatewayClient.connect({ gateway: rig.stack.url, token: rig.stack.token, reconnect: false, telemetry: t.client });
  cleanups.push(() => client.close());
  const session = await client.createSession({ agent: 'test-agent' });
  let pid: number | undefined;
  await session.sendUserMessage(`create a file for ${marker}`);
  const turn = await readTurn(session, (p) => {
    pid = enginePid(rig.stack.agent);
    return { behavior: 'allow', updatedInput: p.input };
  });
  expect(turn.result.is_error).toBe(false);
  expect(turn.prompts.map((p) => p.toolName)).toEqual(['Bash']);
  await Promise.all([t.client?.flush(), t.gateway?.flush(), t.agent?.flush()]);
  return { enginePid: () => pid, traced: [t.client, t.gateway, t.agent] };
}

/** The pid of the agent's one engine (the spawn span says it too; read here to check the environment while it runs). */
function enginePid(agent: unknown): number | undefined {
  const relays = (agent as { relays: Map<string, { engine: { pid?: number } }> }).relays;
  return [...relays.values()][0]?.engine.pid;
}

function byName(spans: ReceivedSpan[], name: string): ReceivedSpan[] {
  return spans.filter((s) => s.name === name);
}

/** Every attribute value of every span, with the span it is on. */
function attributeValues(spans: ReceivedSpan[]): { span: string; key: string; value: string }[] {
  return spans.flatMap((s) => Object.entries(s.attributes).map(([key, v]) => ({ span: s.name, key, value: String(v) })));
}

function checkOneTurn(receiver: OtlpReceiver, marker: string, batched: boolean): void {
  const spans = receiver.spans;
  const prompt = byName(spans, 'tether.client.prompt');
  expect(prompt).toHaveLength(1);
  const traceId = prompt[0].traceId;
  const turn = spans.filter((s) => s.traceId === traceId);
  expect(new Set(turn.map((s) => s.service))).toEqual(new Set(['tether-client', 'tether-gateway', 'tether-agent']));
  // Hop by hop, each the child of the one before: client → gateway → agent's write, and the engine's output back.
  const gatewayInput = turn.find((s) => s.name === 'tether.gateway.input' && s.parentSpanId === prompt[0].spanId);
  expect(gatewayInput?.service).toBe('tether-gateway');
  const write = turn.find((s) => s.name === 'tether.agent.write' && s.parentSpanId === gatewayInput?.spanId);
  expect(write?.attributes['tether.input.type']).toBe('user');
  const outputs = turn.filter((s) => s.name === 'tether.agent.output' && s.parentSpanId === write?.spanId);
  expect(outputs.length).toBeGreaterThan(0);
  // The turn's end (its result) and the tool call are in this trace too, and the gateway relayed each group in it.
  expect(outputs.some((s) => String(s.attributes['tether.line.types']).split(',').includes('result/success'))).toBe(true);
  expect(outputs.some((s) => s.attributes['tether.tools'] === 'Bash')).toBe(true);
  const relayed = turn.filter((s) => s.name === 'tether.gateway.output' && outputs.some((o) => o.spanId === s.parentSpanId));
  expect(relayed.length).toBeGreaterThan(0);
  // Batched: one span per group of lines read together, never more than lines; the demo engine writes a turn's frames in bursts.
  const lines = outputs.reduce((n, s) => n + Number(s.attributes['tether.lines']), 0);
  if (batched) expect(lines).toBeGreaterThan(outputs.length);
  else expect(lines).toBeGreaterThanOrEqual(outputs.length);
  // The answer to the permission prompt has its own trace: client → gateway → the agent's write of it.
  const answer = byName(spans, 'tether.client.answer');
  expect(answer).toHaveLength(1);
  expect(
    spans.some(
      (s) => s.name === 'tether.agent.write' && s.traceId === answer[0].traceId && s.attributes['tether.answer.behavior'] === 'allow',
    ),
  ).toBe(true);
  // The create: client → gateway → agent's spawn.
  const create = byName(spans, 'tether.client.create')[0];
  expect(spans.filter((s) => s.traceId === create.traceId).map((s) => s.name)).toEqual(
    expect.arrayContaining(['tether.gateway.create', 'tether.agent.spawn']),
  );
  // The prompt's text and the tool's input carry the marker; no attribute of any span does.
  expect(attributeValues(spans).filter((a) => a.value.includes(marker))).toEqual([]);
  expect(spans.filter((s) => s.name.includes(marker))).toEqual([]);
}

/** The engine's TRACEPARENT: the agent's spawn span, in the create's trace. */
function checkEngineEnv(receiver: OtlpReceiver, pid: number | undefined): void {
  expect(pid).toBeGreaterThan(0);
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  const traceparent = environ.find((v) => v.startsWith('TRACEPARENT='))?.slice('TRACEPARENT='.length);
  const spawn = byName(receiver.spans, 'tether.agent.spawn')[0];
  expect(traceparent).toBe(`00-${spawn.traceId}-${spawn.spanId}-01`);
  expect(spawn.traceId).toBe(byName(receiver.spans, 'tether.client.create')[0].traceId);
}

describe('traces: the real CLI', () => {
  const cleanups = cleanupsPerTest();

  it('client, gateway and agent export one trace id for one turn, with no prompt text or tool input in any attribute', async () => {
    const receiver = cleanups.own(await startOtlpReceiver());
    const marker = `zebra-${randomUUID()}`;
    const { enginePid } = await oneTurn(cleanups, 'claude', otlpEnv(receiver), { client: 'ws', agent: 'ws' }, marker);
    checkEngineEnv(receiver, enginePid());
    checkOneTurn(receiver, marker, false);
  }, 90_000);
});

describe.each([
  { client: 'ws', agent: 'ws' },
  { client: 'grpc', agent: 'grpc' },
] as const)('traces: the demo engine, client over $client, agent over $agent', (transports) => {
  const cleanups = cleanupsPerTest();

  it('one trace id for one turn, hop by hop, no prompt text in any attribute', async () => {
    const receiver = cleanups.own(await startOtlpReceiver());
    const marker = `zebra-${randomUUID()}`;
    const { enginePid } = await oneTurn(cleanups, 'demo', otlpEnv(receiver), transports, marker);
    checkEngineEnv(receiver, enginePid());
    checkOneTurn(receiver, marker, true);
  }, 60_000);
});

describe('traces: off', () => {
  const cleanups = cleanupsPerTest();

  it.each([
    { why: 'OTEL_SDK_DISABLED=true', extra: { OTEL_SDK_DISABLED: 'true' } },
    { why: 'OTEL_TRACES_EXPORTER=none', extra: { OTEL_TRACES_EXPORTER: 'none' } },
  ])(
    '$why: no program traces and the receiver gets nothing, though an endpoint is set',
    async ({ extra }) => {
      const receiver = cleanups.own(await startOtlpReceiver());
      const env = { ...otlpEnv(receiver), ...extra };
      const { traced } = await oneTurn(cleanups, 'demo', env, { client: 'ws', agent: 'ws' }, `zebra-${randomUUID()}`);
      expect(traced).toEqual([undefined, undefined, undefined]); // no exporter exists to send anything
      expect(receiver.requests).toBe(0);
      expect(receiver.spans).toEqual([]);
    },
    60_000,
  );
});

/** The cluster hop: a client on one gateway drives a session its agent holds on another. */
describe.skipIf(!hasTool('nats-server'))('traces: across the gateways of a cluster', () => {
  const cleanups = cleanupsPerTest();

  it('the call to the home gateway carries the trace: client → forwarding gateway → home gateway → agent, one trace id', async () => {
    const receiver = cleanups.own(await startOtlpReceiver());
    const env = { ...otlpEnv(receiver), OTEL_BSP_SCHEDULE_DELAY: '100' }; // the gateways are processes: their batches go on their own
    const agentTelemetry = await startTelemetry('tether-agent', env);
    const clientTelemetry = await startTelemetry('tether-client', env);
    cleanups.push(
      () => agentTelemetry?.shutdown(),
      () => clientTelemetry?.shutdown(),
    );
    const stack = await startClusterStack({ gateways: 2, scenario: { responses: [{ text: 'Hi.' }] }, gatewayEnv: env, agentTelemetry });
    cleanups.push(() => stack.stop());
    // The agent dials the balancer: gateway 0 holds the session; this client is on gateway 1.
    const client = await GatewayClient.connect({
      gateway: stack.gateways[1].url,
      token: await stack.token('alice'),
      reconnect: false,
      telemetry: clientTelemetry,
    });
    cleanups.push(() => client.close());
    const session = await client.createSession({ agent: 'builder' });
    const it = session[Symbol.asyncIterator]();
    await session.sendUserMessage('say hi');
    await until(it, (i) => i.kind === 'engine' && i.message.type === 'result', [], 60_000, 'the result');
    await Promise.all([clientTelemetry?.flush(), agentTelemetry?.flush()]);
    const prompt = () => receiver.spans.find((s) => s.name === 'tether.client.prompt');
    const hop = (name: string, parent: ReceivedSpan | undefined) =>
      receiver.spans.find(
        (s) => s.name === name && parent !== undefined && s.parentSpanId === parent.spanId && s.traceId === parent.traceId,
      );
    await waitFor(
      () => hop('tether.gateway.input', hop('tether.gateway.forward', prompt())) !== undefined,
      15_000,
      () => `the gateways' spans; got ${receiver.spans.map((s) => s.name).join(', ')}`,
    );
    const forward = hop('tether.gateway.forward', prompt());
    expect(forward?.attributes['tether.method']).toBe('session.send');
    const write = hop('tether.agent.write', hop('tether.gateway.input', forward));
    expect(write?.attributes['tether.input.type']).toBe('user');
    await waitFor(
      () => receiver.spans.some((s) => s.name === 'tether.gateway.output' && s.traceId === prompt()?.traceId),
      15_000,
      'the home gateway relaying the turn',
    );
    // The create went the same way: made at the home gateway, spawned on the agent, one trace.
    const create = receiver.spans.find((s) => s.name === 'tether.client.create');
    expect(receiver.spans.filter((s) => s.traceId === create?.traceId).map((s) => s.name)).toEqual(
      expect.arrayContaining(['tether.gateway.create', 'tether.agent.spawn']),
    );
  }, 120_000);
});
