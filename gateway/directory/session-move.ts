import { TetherError } from '../../core/errors.js';
import { tetherEvent } from '../../core/protocol/events.js';
import type { Principal } from '../door/principal.js';
import { recordOrRefuse } from '../audit/audit-log.js';
import { checkSessionOptions } from '../policy/policy-gate.js';
import type { Session } from '../session/session.js';
import { AGENT_STOP_ANSWER_MS } from './agent-link.js';
import { resumedOptions } from './engine-resume.js';
import type { SessionDirectory } from './session-directory.js';

/**
 * Moves a session to another agent (session.move): the owner or an admin, to an agent the
 * token may use and the policy lets run these options (in `cwd`, default the same path), at a
 * turn boundary. The source hands over the engine's transcript (bounded) and stops the engine
 * without ending the session; the target writes the transcript where its engine looks and
 * resumes it, continuing the session's seqs. Audited (`move`) before anything changes. Once the
 * source let go, a target that cannot resume ends the session with the reason.
 */
export async function moveSession(dir: SessionDirectory, p: Principal, s: Session, target: string, cwd?: string): Promise<void> {
  if (!p.canAdmin && s.owner !== p.sub) throw new TetherError('PERMISSION_DENIED', 'only the session owner or an admin can move it');
  if (s.ended) throw new TetherError('FAILED_PRECONDITION', `session ${s.id} has ended`);
  if (target === s.agent) throw new TetherError('FAILED_PRECONDITION', `session ${s.id} already runs on agent "${target}"`);
  const to = p.agents === undefined || p.agents.includes(target) ? dir.agent(target) : undefined;
  if (!to) throw new TetherError('NOT_FOUND', `no agent named "${target}" is connected`);
  if (!to.descriptor.engines.includes(s.engine))
    throw new TetherError('FAILED_PRECONDITION', `agent "${target}" cannot run engine "${s.engine}"`);
  const options = checkSessionOptions(dir.policy.current, target, cwd === undefined ? s.options : { ...s.options, cwd }, {
    ...p,
    role: 'owner',
  });
  if (s.currentState !== 'idle')
    throw new TetherError('FAILED_PRECONDITION', `a session moves between turns; this one is ${s.currentState}`);
  const from = dir.agent(s.agent);
  if (!from) throw new TetherError('UNAVAILABLE', `agent "${s.agent}" of session ${s.id} is not connected`);
  recordOrRefuse(
    dir.audit,
    { session_id: s.id, principal: p.sub, action: 'move', from_agent: s.agent, to_agent: target, ...(cwd === undefined ? {} : { cwd }) },
    dir.log,
  );
  const transcript = await from.peer.request('agent.export', { session_id: s.id }, { timeoutMs: AGENT_STOP_ANSWER_MS });
  s.moveTo(target, cwd, p.sub);
  const c = s.continuation();
  try {
    await to.spawn(
      s.id,
      s.engine,
      resumedOptions(options, transcript.engine_session_id),
      dir.spawnPolicy(target),
      { next_seq: c.nextSeq, last_input_seq: c.lastInputSeq },
      transcript,
    );
  } catch (err) {
    const reason = `moved to agent "${target}", whose engine could not resume the transcript: ${(err as Error).message}`.slice(0, 4000);
    s.end(tetherEvent({ subtype: 'exited', code: null, signal: null, stderr_tail: '', reason }));
    throw err;
  }
  s.bindHost(to, c.lastInputSeq);
}
