import { TetherError } from '../core/errors.js';
import { EngineKind } from '../core/protocol/session-options.js';

/** `--engine NAME` of the commands that start a session (tether chat, tether run). */
export const ENGINE_OPTION = { engine: { type: 'string' as const } };

/** Its line in their --help. */
export const ENGINE_HELP = `  --engine NAME            which of the agent's engines runs the session (tether agents lists
                           them; default: the agent's first): ${EngineKind.options.join(', ')}`;

/** The engine a command line names, or undefined (the agent's default); INVALID_ARGUMENT for an unknown one. */
export function engineOf(value: unknown): EngineKind | undefined {
  if (value === undefined) return undefined;
  const kind = EngineKind.safeParse(value);
  if (!kind.success)
    throw new TetherError('INVALID_ARGUMENT', `--engine must be one of ${EngineKind.options.join(', ')}; got ${JSON.stringify(value)}`);
  return kind.data;
}
