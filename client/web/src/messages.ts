/**
 * What the page tells a person when something fails: plain sentences, never a code, a stack
 * or the gateway's internal wording alone.
 */
import { TetherError } from '../../../core/errors.js';

/** Why a session could not be opened (started, attached, or named in the address). */
export function openFailure(err: unknown, fromAddress: boolean): string {
  const code = err instanceof TetherError ? err.code : '';
  const which = fromAddress ? 'The session in this address' : 'That session';
  if (code === 'NOT_FOUND')
    return `${which} is not on the gateway any more (it ended, or the address is wrong). Pick one below or start a new one.`;
  if (code === 'PERMISSION_DENIED') return `You are not allowed to open ${fromAddress ? 'the session in this address' : 'that session'}.`;
  if (err instanceof TetherError && err.retryable) return 'The gateway could not be reached just now. Try again in a moment.';
  return `Could not open the session: ${err instanceof Error ? err.message : String(err)}`;
}
