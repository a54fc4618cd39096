/**
 * AskUserQuestion in an editor: through ACP elicitation (a form, one choice field per
 * question) where the editor declares `elicitation.form`; otherwise one
 * `session/request_permission` per question whose options are the question's answers plus
 * "Decline" (every ACP editor renders permission options). Multi-select questions fall back
 * to a single choice there. Either way the engine gets its own answer shape
 * (engine-protocol.md section 7), or a denial when the person declines.
 */
import * as acp from '@agentclientprotocol/sdk';
import { answerQuestions, askQuestions, type PermissionAnswer } from '../permission-policy.js';

const DECLINED: PermissionAnswer = { behavior: 'deny', message: 'The user declined to answer' };

export async function askByElicitation(
  editor: acp.AgentContext,
  sessionId: string,
  toolCallId: string,
  input: Record<string, unknown>,
  signal: AbortSignal,
): Promise<PermissionAnswer> {
  const questions = askQuestions(input);
  const properties: Record<string, acp.ElicitationPropertySchema> = {};
  questions.forEach((q, i) => {
    const labels = q.options.map((o) => o.label);
    properties[`q${i}`] = q.multiSelect
      ? { type: 'array', title: q.header ?? q.question, description: q.question, items: { type: 'string', enum: labels } }
      : { type: 'string', title: q.header ?? q.question, description: q.question, enum: labels };
  });
  const r = await editor.request(
    acp.methods.client.elicitation.create,
    {
      mode: 'form',
      sessionId,
      toolCallId,
      message: questions.map((q) => q.question).join('\n'),
      requestedSchema: { type: 'object', properties, required: Object.keys(properties) },
    },
    { cancellationSignal: signal },
  );
  if (r.action !== 'accept') return DECLINED;
  const content = (r as { content?: Record<string, unknown> | null }).content ?? {};
  const answers: Record<string, string> = {};
  questions.forEach((q, i) => {
    const v = content[`q${i}`];
    answers[q.question] = Array.isArray(v) ? v.join(', ') : String(v ?? '');
  });
  return answerQuestions(input, answers);
}

export async function askByPermissionOptions(
  editor: acp.AgentContext,
  sessionId: string,
  toolCall: acp.ToolCallUpdate,
  input: Record<string, unknown>,
  signal: AbortSignal,
): Promise<PermissionAnswer> {
  const answers: Record<string, string> = {};
  for (const q of askQuestions(input)) {
    const options: acp.PermissionOption[] = [
      ...q.options.map((o, i) => ({ optionId: `answer_${i}`, name: o.label, kind: 'allow_once' as const })),
      { optionId: 'decline', name: 'Decline', kind: 'reject_once' },
    ];
    const r = await editor.request(
      acp.methods.client.session.requestPermission,
      { sessionId, toolCall: { ...toolCall, title: q.question }, options },
      { cancellationSignal: signal },
    );
    const id = r.outcome.outcome === 'selected' ? r.outcome.optionId : 'decline';
    const chosen = q.options[Number(id.replace('answer_', ''))];
    if (id === 'decline' || !chosen) return DECLINED;
    answers[q.question] = chosen.label;
  }
  return answerQuestions(input, answers);
}
