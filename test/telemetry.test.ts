/**
 * Tracing is off and costs nothing unless the standard OTEL_* variables ask for it
 * (core/telemetry/telemetry.ts): the decision and its clear errors; and the real programs
 * (`tether up`, `tether run`) without them load no module of the OpenTelemetry SDK and export nothing,
 * while with them the receiver gets each program's spans of the turn under one trace id.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TetherError } from '../core/errors.js';
import { telemetryConfig } from '../core/telemetry/telemetry.js';
import { agentInputText, BinaryHeaders, Methods } from '../core/protocol/methods.js';
import { TraceContext } from '../core/protocol/trace-context.js';
import { cleanupsPerTest } from './support/cleanups.js';
import { runTether, startTether } from './support/cli.js';
import { startOtlpReceiver } from './support/otlp-receiver.js';
import { waitFor } from './support/wait.js';

describe('telemetryConfig: the standard variables', () => {
  it('is off without them, and when they turn it off', () => {
    expect(telemetryConfig({})).toBeUndefined();
    expect(telemetryConfig({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBeUndefined(); // no endpoint, no exporter: off, nothing checked
    expect(telemetryConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    expect(telemetryConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
  });

  it('is on with an endpoint or OTEL_TRACES_EXPORTER=otlp, and finds the traces URL as the specification says', () => {
    expect(telemetryConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })?.url).toBe('http://c:4318/v1/traces');
    expect(telemetryConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c/custom' })?.url).toBe('https://c/custom');
    expect(telemetryConfig({ OTEL_TRACES_EXPORTER: 'otlp' })?.url).toBe('http://localhost:4318/v1/traces');
    expect(
      telemetryConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_HEADERS: 'api-key=a%20b, x=1',
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x=2',
        OTEL_BSP_SCHEDULE_DELAY: '250',
      }),
    ).toEqual({ url: 'http://c:4318/v1/traces', headers: { 'api-key': 'a b', x: '2' }, scheduleDelayMs: 250 });
  });

  it.each([
    [{ OTEL_TRACES_EXPORTER: 'jaeger' }, 'OTEL_TRACES_EXPORTER: jaeger is not an exporter'],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'OTEL_EXPORTER_OTLP_PROTOCOL: Tether exports traces as OTLP http/json',
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' },
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Tether exports',
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }, 'OTEL_EXPORTER_OTLP_ENDPOINT: "not a url/v1/traces" is not a URL'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c/x' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ftp://c/x is not an http'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }, 'OTEL_EXPORTER_OTLP_HEADERS: expected key=value'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_BSP_SCHEDULE_DELAY: 'soon' }, 'OTEL_BSP_SCHEDULE_DELAY: "soon" is not a whole number'],
  ])('refuses %j with INVALID_ARGUMENT naming the variable', (env, message) => {
    let thrown: unknown;
    try {
      telemetryConfig(env);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(TetherError);
    expect((thrown as TetherError).code).toBe('INVALID_ARGUMENT');
    expect((thrown as TetherError).message).toContain(message);
  });
});

describe('the trace field frames carry', () => {
  const ok = { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` };

  it('takes W3C trace context and refuses anything else in the params that carry it', () => {
    const send = Methods['session.send'].params;
    const base = { session_id: 's', input_id: 'i', line: { type: 'user' } };
    expect(send.parse({ ...base, trace: ok }).trace).toEqual(ok);
    expect(send.safeParse({ ...base, trace: { ...ok, tracestate: 'k=v' } }).success).toBe(true);
    for (const trace of [
      { traceparent: 'zz' },
      { traceparent: `00-${'A'.repeat(32)}-${'b'.repeat(16)}-01` },
      { ...ok, tracestate: 'x'.repeat(513) },
      { ...ok, extra: 1 },
    ])
      expect(send.safeParse({ ...base, trace }).success).toBe(false);
    expect(TraceContext.safeParse(ok).success).toBe(true);
  });

  it('rides the hand-written agent.input and session.output headers as JSON.stringify would write them', () => {
    const input = { session_id: 's', seq: 3, trace: ok };
    expect(JSON.parse(agentInputText(input, '{"type":"user"}'))).toEqual({
      jsonrpc: '2.0',
      method: 'agent.input',
      params: { ...input, line: { type: 'user' } },
    });
    const output = { session_id: 's', seq: 4, meta: { type: 'assistant' }, trace: ok };
    expect(BinaryHeaders['session.output'](output)).toBe(JSON.stringify({ method: 'session.output', params: output }));
  });
});

const PROBE = fileURLToPath(new URL('./support/otel-loaded-probe.cjs', import.meta.url));

describe('the programs, with and without OTEL_* (tether up + tether run, demo engine)', () => {
  const cleanups = cleanupsPerTest();

  /** One `tether run` turn against `tether up`, both under the probe and `otel`; resolves with what each program loaded. */
  async function turn(otel: NodeJS.ProcessEnv): Promise<Map<string, number>> {
    const dir = cleanups.tempDir('tether-otel-cwd-');
    const state = cleanups.tempDir('tether-otel-state-');
    const probe = join(cleanups.tempDir('tether-otel-probe-').path, 'loaded');
    // Every OTEL_* of the test's own environment is cleared: only `otel` decides.
    const cleared = Object.fromEntries(
      Object.keys(process.env)
        .filter((k) => k.startsWith('OTEL_'))
        .map((k) => [k, undefined]),
    );
    const env = { ...cleared, ...otel, NODE_OPTIONS: `--require ${PROBE}`, TETHER_OTEL_PROBE_FILE: probe };
    const up = startTether(['up', '--port', '0', '--engine', 'demo', '--cwd', dir.path, '--state-dir', state.path], { env });
    cleanups.push(() => up.stop());
    const url = (await up.line('gateway: ')).slice('gateway: '.length);
    const token = (await up.line('token: ')).slice('token: '.length);
    const run = await runTether(['run', '--gateway', url, '--agent', 'local', 'hello there'], { env: { ...env, TETHER_TOKEN: token } });
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain('You said: hello there');
    expect((await up.stop()).code).toBe(0);
    const loaded = new Map(
      readFileSync(probe, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' '))
        .map(([program, n]) => [program, Number(n)] as const),
    );
    expect([...loaded.keys()].sort()).toEqual(['run', 'up']);
    return loaded;
  }

  it('without them: no module of the OpenTelemetry SDK is loaded in any program, and nothing is exported', async () => {
    const receiver = cleanups.own(await startOtlpReceiver()); // where a default endpoint would not reach; nobody is told of it
    const loaded = await turn({});
    expect(Object.fromEntries(loaded)).toEqual({ up: 0, run: 0 });
    expect(receiver.requests).toBe(0);
  }, 60_000);

  it('with an endpoint: each program loads the SDK and exports its spans of the turn under one trace id', async () => {
    const receiver = cleanups.own(await startOtlpReceiver());
    const loaded = await turn({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    expect(loaded.get('up')).toBeGreaterThan(0);
    expect(loaded.get('run')).toBeGreaterThan(0);
    await waitFor(() => receiver.spans.some((s) => s.name === 'tether.gateway.output'), 10_000, 'the gateway spans');
    const prompt = receiver.spans.find((s) => s.name === 'tether.client.prompt');
    const services = new Set(receiver.spans.filter((s) => s.traceId === prompt?.traceId).map((s) => s.service));
    expect(services).toEqual(new Set(['tether-client', 'tether-gateway', 'tether-agent']));
  }, 60_000);
});
