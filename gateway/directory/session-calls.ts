import { TetherError } from '../../core/errors.js';
import {
  ATTACH_MEMBERS_LISTED,
  type ParamsOf,
  type ResultOf,
  type SessionCall,
  type SessionCallParams,
} from '../../core/protocol/methods.js';
import type { Role } from '../../core/protocol/events.js';
import type { Principal } from '../door/principal.js';
import type { Member, Session } from '../session/session.js';
import type { GatewayMetrics } from '../metrics.js';
import type { SessionDirectory } from './session-directory.js';
import { stopAcrossCuts } from './session-stop.js';
import { requireControlScope } from '../session/session.js';
import { checkAnswerModes, checkControlAudited } from '../policy/policy-gate.js';
import { readAudit } from './audit-access.js';
import { moveSession } from './session-move.js';
import { readSessionFolder } from './session-folder.js';

/**
 * One client input (`session.send`, or a `session.post` applied in place) to a session this
 * gateway holds and the caller may see: scopes, policy, roles, dedupe and audit as in
 * {@link applySessionCall}, without a promise (a prompt's round trip runs through it). Throws
 * the typed error the call answers with.
 */
export function applyInput(
  dir: SessionDirectory,
  c: Caller,
  session: Session,
  s: ParamsOf<'session.send'>,
  metrics?: GatewayMetrics,
): 'applied' | 'duplicate' {
  const p = c.principal;
  const clientId = c.member.clientId;
  requireControlScope(p, 'send to sessions');
  if (s.line.type === 'control_request') checkControlAudited(dir, session, p, clientId, s.line, session.roleOf(clientId));
  if (s.line.type === 'control_response') checkAnswerModes(dir.policy.current, s.line, { ...p, role: session.roleOf(clientId) });
  const applied = metrics && ((text: string) => metrics.relayed('from_client', Buffer.byteLength(text)));
  if (!dir.tracer) return session.input(clientId, s.input_id, s.line, applied);
  // One span per client input at this hop; the agent.input it sends carries it on (agent-link.ts).
  const span = dir.tracer.start(
    'tether.gateway.input',
    s.trace,
    { 'tether.session_id': session.id, 'tether.input_id': s.input_id },
    'server',
  );
  try {
    const status = dir.inputTrace.run(span.context, () => session.input(clientId, s.input_id, s.line, applied));
    span.set({ 'tether.input.type': s.line.type as string, 'tether.input.status': status }); // a type the session took: one it knows
    span.end();
    return status;
  } catch (err) {
    span.end(err);
    throw err;
  }
}

/** Who makes a call: the principal the door admitted, and the member frames and replies go to. */
export interface Caller {
  principal: Principal;
  member: Member;
}

/**
 * Applies one session call at the gateway that holds the session: visibility, scopes, roles,
 * policy, dedupe and audit exactly as for every client. Used by ClientLink for its own clients
 * and by the cluster for clients of other gateways (gateway/cluster/), so both go one path.
 */
export async function applySessionCall<M extends SessionCall>(
  dir: SessionDirectory,
  c: Caller,
  method: M,
  params: SessionCallParams<M>,
  metrics?: GatewayMetrics,
): Promise<ResultOf<M>> {
  const p = c.principal;
  const clientId = c.member.clientId;
  if (method === 'session.audit') return readAudit(dir, p, params as ParamsOf<'session.audit'>) as ResultOf<M>; // its own visibility rule
  const session = dir.visible(p, params.session_id);
  switch (method) {
    case 'session.attach': {
      const a = params as ParamsOf<'session.attach'>;
      const span = dir.tracer?.start(
        'tether.gateway.attach',
        a.trace,
        { 'tether.session_id': session.id, 'tether.from_seq': a.from_seq },
        'server',
      );
      const role: Role = session.roles.roleFor(p, a.read_only);
      const nextSeq = session.attach(c.member, role, a.from_seq, a.previous_client_id);
      if (a.from_seq !== undefined) metrics?.resumed('client');
      span?.end();
      return { session: session.info(ATTACH_MEMBERS_LISTED), role, client_id: clientId, next_seq: nextSeq } as ResultOf<M>;
    }
    case 'session.info':
      return { session: session.info() } as ResultOf<M>;
    case 'session.folder':
      return (await readSessionFolder(dir, session, (params as ParamsOf<'session.folder'>).query)) as ResultOf<M>;
    case 'session.detach':
      session.detach(clientId);
      return {} as ResultOf<M>;
    case 'session.send':
      return { status: applyInput(dir, c, session, params as ParamsOf<'session.send'>, metrics) } as ResultOf<M>;
    case 'session.set_role': {
      const r = params as ParamsOf<'session.set_role'>;
      requireControlScope(p, 'change roles');
      session.setRole(clientId, r.client_id, r.role, (id) => dir.mayControl(id));
      return {} as ResultOf<M>;
    }
    case 'session.move': {
      const r = params as ParamsOf<'session.move'>;
      requireControlScope(p, 'move sessions');
      await moveSession(dir, p, session, r.agent, r.cwd);
      return {} as ResultOf<M>;
    }
    case 'session.set_owner': {
      const r = params as ParamsOf<'session.set_owner'>;
      requireControlScope(p, 'hand sessions over');
      session.setOwner(clientId, r.owner, (sub) => dir.knowsPrincipal(sub));
      return {} as ResultOf<M>;
    }
    case 'session.withdraw_rule': {
      const r = params as ParamsOf<'session.withdraw_rule'>;
      requireControlScope(p, 'withdraw rules');
      session.withdrawRule(clientId, r.rule);
      return {} as ResultOf<M>;
    }
    case 'session.rename': {
      requireControlScope(p, 'rename sessions');
      session.rename(p, (params as ParamsOf<'session.rename'>).title);
      return {} as ResultOf<M>;
    }
    case 'session.follow': {
      if (!dir.follow) throw new TetherError('FAILED_PRECONDITION', 'notifications are off on this gateway: nothing to follow by');
      dir.follow(p.sub, session.id, (params as ParamsOf<'session.follow'>).follow);
      return {} as ResultOf<M>;
    }
    case 'session.withdraw_prompt': {
      requireControlScope(p, 'withdraw prompts');
      session.withdrawPrompt(clientId, (params as ParamsOf<'session.withdraw_prompt'>).uuid);
      return {} as ResultOf<M>;
    }
    default: {
      const s = params as ParamsOf<'session.stop'>;
      requireControlScope(p, 'stop sessions');
      await stopAcrossCuts(session, dir.waits, clientId, `stopped by ${p.sub}`, dir.agentWaitMs, s.signal);
      return {} as ResultOf<M>;
    }
  }
}
