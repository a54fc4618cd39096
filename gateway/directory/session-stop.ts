import { asTetherError } from '../../core/errors.js';
import type { AgentWaits } from './agent-waits.js';
import type { StopSignal } from '../../core/protocol/methods.js';
import type { Session } from '../session/session.js';

/** Stop attempts across link drops before the error is returned. */
const MAX_STOP_ATTEMPTS = 20;
/** Pause before asking again when the agent was there at once. */
const PAUSE_MS = 250;

/**
 * A session.stop that survives the agent's link dropping: when the stop cannot reach the agent
 * (its link is down, or dropped before the answer), it waits for the agent to come back
 * (bounded by `waitMs` each time) and asks again. The agent stops an engine at most once
 * (a second stop of the same engine joins the first), so the engine is stopped exactly once;
 * resolves once it has exited or the session has ended. Only the first attempt checks the
 * caller's role (it may have reconnected meanwhile under a new client id).
 */
export async function stopAcrossCuts(
  session: Session,
  waits: AgentWaits,
  clientId: string,
  reason: string,
  waitMs: number,
  signal?: StopSignal,
): Promise<void> {
  let by: string | undefined = clientId;
  for (let attempt = 1; ; attempt++) {
    try {
      await session.stop(by, reason, signal);
      return;
    } catch (err) {
      if (session.ended) return;
      if (asTetherError(err).code !== 'UNAVAILABLE' || attempt >= MAX_STOP_ATTEMPTS) throw err;
    }
    by = undefined;
    const waitedFrom = Date.now();
    await waits.linkOf(session.agent, waitedFrom + waitMs);
    // The agent is there but the session is not bound to it yet (its create is binding it): pause.
    if (Date.now() - waitedFrom < PAUSE_MS) await new Promise((r) => setTimeout(r, PAUSE_MS));
  }
}
