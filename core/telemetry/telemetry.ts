/**
 * Whether a program traces, decided once at its start by the standard OpenTelemetry variables
 * (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/), and
 * its start. Off unless they ask for it: then nothing of OpenTelemetry is even loaded, so a
 * program that does not trace starts and runs as it would without this module.
 */
import { TetherError } from '../errors.js';
import type { Telemetry } from './tracer.js';

/** The service name each program reports (OpenTelemetry's `service.name`). */
export type ServiceName = 'tether-gateway' | 'tether-agent' | 'tether-client';

/** What tracing needs, read from the environment. */
export interface TelemetryConfig {
  /** Where spans go: the collector's OTLP/HTTP traces URL. */
  url: string;
  /** Sent with every export (e.g. an API key). */
  headers: Record<string, string>;
  /** How long ended spans wait to be exported together (OTEL_BSP_SCHEDULE_DELAY). */
  scheduleDelayMs: number;
}

/** The OTLP/HTTP default (a collector on this machine), as the specification states it. */
const DEFAULT_ENDPOINT = 'http://localhost:4318';
const DEFAULT_SCHEDULE_DELAY_MS = 5_000;

/**
 * The tracing configuration `env` asks for, or undefined when it asks for none: tracing is on
 * when `OTEL_TRACES_EXPORTER` says `otlp`, or, unset, when an OTLP endpoint is given;
 * `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off. Throws
 * INVALID_ARGUMENT naming the variable for a value Tether cannot honour.
 */
export function telemetryConfig(env: NodeJS.ProcessEnv = process.env): TelemetryConfig | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter(Boolean);
  const unknown = exporters.filter((e) => e !== 'otlp' && e !== 'none');
  if (unknown.length) throw bad('OTEL_TRACES_EXPORTER', `${unknown.join(', ')} is not an exporter Tether has (use otlp, or none)`);
  const signalEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const on = exporters.length ? exporters.includes('otlp') : Boolean(signalEndpoint || endpoint);
  if (!on) return undefined;
  const protocolVar = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env[protocolVar]?.trim();
  if (protocol && protocol !== 'http/json')
    throw bad(protocolVar, `Tether exports traces as OTLP http/json, not ${protocol} (collectors take it on their OTLP/HTTP port, 4318)`);
  // The signal's own endpoint is used as given; the general one gets the traces path (the specification's rule).
  const url = signalEndpoint || `${(endpoint || DEFAULT_ENDPOINT).replace(/\/+$/, '')}/v1/traces`;
  const which = signalEndpoint ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw bad(which, `${JSON.stringify(url)} is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw bad(which, `${url} is not an http:// or https:// URL`);
  return {
    url,
    headers: {
      ...headersOf(env, 'OTEL_EXPORTER_OTLP_HEADERS'),
      ...headersOf(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
    },
    scheduleDelayMs: delayOf(env),
  };
}

/**
 * Starts tracing for one program when `env` asks for it (see {@link telemetryConfig}):
 * only then is the OpenTelemetry SDK imported. Resolves with undefined when tracing is off.
 */
export async function startTelemetry(service: ServiceName, env: NodeJS.ProcessEnv = process.env): Promise<Telemetry | undefined> {
  const config = telemetryConfig(env);
  if (!config) return undefined;
  const { startOtel } = await import('./otel-sdk.js');
  return startOtel(service, config);
}

/** `key=value,key2=value2`, values percent-encoded (the specification's form). */
function headersOf(env: NodeJS.ProcessEnv, name: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (env[name] ?? '').split(',')) {
    if (!pair.trim()) continue;
    const at = pair.indexOf('=');
    if (at <= 0) throw bad(name, 'expected key=value pairs separated by commas');
    try {
      headers[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      throw bad(name, `the value of ${pair.slice(0, at).trim()} is not percent-encoded text`);
    }
  }
  return headers;
}

function delayOf(env: NodeJS.ProcessEnv): number {
  const raw = env.OTEL_BSP_SCHEDULE_DELAY?.trim();
  if (!raw) return DEFAULT_SCHEDULE_DELAY_MS;
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms < 0) throw bad('OTEL_BSP_SCHEDULE_DELAY', `${JSON.stringify(raw)} is not a whole number of milliseconds`);
  return ms;
}

function bad(name: string, why: string): TetherError {
  return new TetherError('INVALID_ARGUMENT', `${name}: ${why}`);
}
