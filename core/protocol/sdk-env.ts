import { z } from 'zod';

/**
 * The environment switches an Agent SDK sets on the CLI it spawns to change the engine's
 * behaviour, read from the SDKs' own source (TypeScript SDK 0.3.332 `sdk.mjs`, the Python
 * SDK's `subprocess_cli.py`). A drop-in forwards exactly these from the environment the SDK
 * gave it (session option `env`); the agent applies them to the engine and strips them from
 * its own inherited environment, so an engine gets a switch only when its client set it.
 * docs/compatibility.md lists them with what each does.
 */
export const SDK_ENV_SWITCHES = [
  /** `enableFileCheckpointing` / `enable_file_checkpointing`: without it `rewind_files` fails. */
  'CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING',
  /** TS SDK: the engine writes `system/session_state_changed` frames. */
  'CLAUDE_CODE_SDK_READS_SESSION_STATE',
  /** TS SDK (with startup marks wanted): the engine reports start-up marks. */
  'CLAUDE_CODE_SDK_READS_STARTUP_MARKS',
  /** `sdk-ts` or `sdk-py` (or the app's own): how the engine labels its entry point. */
  'CLAUDE_CODE_ENTRYPOINT',
  /** The SDK's version, as reported by the engine. */
  'CLAUDE_AGENT_SDK_VERSION',
  /** `toolConfig.askUserQuestion`: the shape of AskUserQuestion the engine offers. */
  'CLAUDE_CODE_QUESTION_PREVIEW_FORMAT',
  'CLAUDE_CODE_QUESTION_EXTENDED',
  'CLAUDE_CODE_QUESTION_OPTIONAL_DESCRIPTIONS',
  /** Progress summaries of subagents (the SDK of the day always clears it). */
  'CLAUDE_CODE_AGENT_PROGRESS_SUMMARIES',
  /** OpenTelemetry trace context, so the engine's spans join the app's trace. */
  'TRACEPARENT',
  'TRACESTATE',
] as const;
export type SdkEnvSwitch = (typeof SDK_ENV_SWITCHES)[number];

/** Longest value accepted for one switch (a W3C tracestate is at most 512 characters). */
export const SDK_ENV_MAX_VALUE_CHARS = 1024;

/** The allow-list as a set: an immutable table, built once and never added to. */
const SWITCHES: ReadonlySet<string> = new Set(SDK_ENV_SWITCHES);

/** The `env` session option: allow-listed keys only, short printable values. */
export const SdkEnv = z.partialRecord(
  z.enum(SDK_ENV_SWITCHES),
  z
    .string()
    .max(SDK_ENV_MAX_VALUE_CHARS)
    .regex(/^[^\0\r\n]*$/, 'no NUL or line breaks'),
);
export type SdkEnv = z.infer<typeof SdkEnv>;

/** Whether `name` is one of the switches (exact spelling; the CLI reads them case-sensitively). */
export function isSdkEnvSwitch(name: string): name is SdkEnvSwitch {
  return SWITCHES.has(name);
}

/** The switches set (non-empty) in `env`, e.g. the environment an SDK gave a drop-in. */
export function pickSdkEnv(env: Record<string, string | undefined>): SdkEnv {
  const out: SdkEnv = {};
  for (const name of SDK_ENV_SWITCHES) {
    const v = env[name];
    if (v !== undefined && v !== '') out[name] = v;
  }
  return out;
}

/**
 * The engine's environment: `base` (the agent's own) without any SDK switch, plus the ones
 * the client asked for. Nothing of the kind is set that the client did not ask for.
 */
export function withSdkEnv(base: Record<string, string | undefined>, requested: SdkEnv | undefined): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(base)) if (!SWITCHES.has(k)) out[k] = v;
  return { ...out, ...requested };
}
