import { z } from 'zod';
import { TetherError } from '../errors.js';
import { SdkEnv } from './sdk-env.js';
import { TurnApproval } from './turn-approval.js';
import { WorktreeRequest } from './worktree.js';

/**
 * Engine kinds an agent can run: the Claude CLI, the built-in demo, and agents spoken to over
 * ACP (`acp` with the agent's own command line, or a preset that knows it: agent/acp-engine/presets.ts).
 */
export const EngineKind = z.enum(['claude', 'demo', 'acp', 'opencode', 'gemini', 'codex', 'claude-acp']);
export type EngineKind = z.infer<typeof EngineKind>;

export const PermissionMode = z.enum(['default', 'acceptEdits', 'auto', 'bypassPermissions', 'dontAsk', 'plan', 'manual']);

const toolName = z.string().min(1).max(256);

/**
 * What a client may ask of a new engine process. Each flag field maps to one CLI flag; anything
 * else the drop-in forwards goes through `extra_args`, which the agent checks against its
 * allow list. Wire names are snake_case like the engine's own.
 */
export const SessionOptions = z
  .object({
    cwd: z.string().min(1).max(4096).optional(),
    model: z.string().min(1).max(256).optional(),
    permission_mode: PermissionMode.optional(),
    allowed_tools: z.array(toolName).max(256).optional(),
    disallowed_tools: z.array(toolName).max(256).optional(),
    resume: z.string().min(1).max(256).optional(),
    system_prompt: z.string().max(1_000_000).optional(),
    append_system_prompt: z.string().max(1_000_000).optional(),
    include_partial_messages: z.boolean().optional(),
    /** Extra CLI arguments (the drop-in forwards what the SDK passes); the agent allow-lists them. */
    extra_args: z.array(z.string().max(1_000_000)).max(256).optional(),
    /** SDK environment switches for the engine (core/protocol/sdk-env.ts); the agent sets no others. */
    env: SdkEnv.optional(),
    /**
     * The client will send the engine's `initialize` itself (an SDK drop-in, a library or pipe
     * client that starts with one): the agent sends none of its own at spawn, and merges what it
     * must add into the client's (docs/protocol.md, "One initialize per engine").
     */
    client_initialize: z.boolean().optional(),
    /** Who approves tool calls in others' turns: only stricter than the policy's (docs/policy.md); the gateway's concern, not the engine's. */
    turn_approval: TurnApproval.optional(),
    /**
     * Run the engine in a fresh git worktree of the repository `cwd` is in (core/protocol/worktree.ts);
     * the agent creates it inside its session roots and removes it at the end when it is clean.
     */
    worktree: WorktreeRequest.optional(),
  })
  .strict();
export type SessionOptions = z.infer<typeof SessionOptions>;

/**
 * Most a session's options may weigh, as JSON (UTF-8 bytes): every listing, attach answer,
 * stored record and audit entry carries them, so one token must not be able to make them
 * huge (issue 27, item 10). Refused at create with INVALID_ARGUMENT.
 */
export const MAX_SESSION_OPTIONS_BYTES = 64 * 1024;

/** Throws INVALID_ARGUMENT, naming the size and the bound, when `options` weigh more than {@link MAX_SESSION_OPTIONS_BYTES}. */
export function assertSessionOptionsBounded(options: SessionOptions): void {
  const bytes = Buffer.byteLength(JSON.stringify(options));
  if (bytes <= MAX_SESSION_OPTIONS_BYTES) return;
  throw new TetherError(
    'INVALID_ARGUMENT',
    `session options are ${bytes} bytes as JSON, over the limit of ${MAX_SESSION_OPTIONS_BYTES} (a long system prompt or extra_args? put it in a file on the agent)`,
    {
      bytes,
      limit: MAX_SESSION_OPTIONS_BYTES,
    },
  );
}

/** The part of a session's options that listings carry (each field bounded by the schema): the rest comes with `session.info`. */
export function listedOptions(options: SessionOptions): SessionOptions {
  const { cwd, model, permission_mode } = options;
  return {
    ...(cwd === undefined ? {} : { cwd }),
    ...(model === undefined ? {} : { model }),
    ...(permission_mode === undefined ? {} : { permission_mode }),
  };
}
