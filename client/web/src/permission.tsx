/**
 * A pending permission prompt: the tool, its input (Edit as a diff), who may answer, and
 * Allow / Allow the engine's proposed rule for this session / Deny / Deny with a message. AskUserQuestion shows its
 * options and a free-text answer instead. Once anyone answered, the card turns into one line
 * saying who did, for everyone.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { proposedSessionRule, ruleLabel } from '../../permission-policy.js';
import { ToolSummary } from './entries';
import type { OpenSession } from './session';
import type { PermissionPrompt } from './transcript';
import { mayAnswer, promptTurnText } from '../../turn-view.js';

interface Question {
  question: string;
  header?: string;
  options: { label: string; description?: string }[];
  multiSelect?: boolean;
}

export function PermissionCard({
  prompt: p,
  session,
  canAnswer,
  answerers,
}: {
  prompt: PermissionPrompt;
  session: OpenSession;
  canAnswer: boolean;
  answerers: string[];
}) {
  const [denying, setDenying] = useState(false);
  const [message, setMessage] = useState('');
  const [error, setError] = useState<string>();
  const card = useRef<HTMLDivElement>(null);
  useEffect(() => {
    // Focus moves to a new prompt (announced; Tab reaches Allow), but never out of a field
    // someone is typing in, and never onto a button a stray Enter would press.
    const a = document.activeElement;
    const typing = (a instanceof HTMLTextAreaElement || a instanceof HTMLInputElement) && a.value !== '';
    if (p.status === 'pending' && canAnswer && !typing) card.current?.focus();
  }, []);

  if (p.status !== 'pending') {
    const verdict =
      p.status === 'decided'
        ? `${p.behavior === 'allow' ? 'allowed' : p.behavior === 'deny' ? 'denied' : p.behavior} by ${p.rule ? `${p.decidedBy}'s rule ${p.rule}` : p.decidedBy}`
        : 'no longer needed (the engine withdrew the question)';
    return (
      <div class="note info" data-testid="prompt-decided">
        {p.toolName}: {verdict}
        {p.lateAnswer && (
          <strong data-testid="late-answer">
            {' '}
            Your answer came second and was not used{p.status === 'decided' ? `: ${p.decidedBy} had already answered` : ''}.
          </strong>
        )}
      </div>
    );
  }
  // Someone else's turn may need the owner's or an approver's answer (turnApproval); the gateway refuses anyone else.
  const who = p.turn?.approval ? p.turn.approval.may_answer : answerers;
  canAnswer = canAnswer && mayAnswer(p.turn, session.principal);
  const send = (response: Record<string, unknown>) => session.answer(p.requestId, response).catch((err: Error) => setError(err.message));
  const allow = () => send({ behavior: 'allow', updatedInput: p.input });
  // Only the rule the engine proposed for this very call, for this session; none proposed, none offered.
  const rule = proposedSessionRule(p.request);
  const allowSession = (r: NonNullable<typeof rule>) => send({ behavior: 'allow', updatedInput: p.input, updatedPermissions: [r] });
  const deny = (text?: string) => send({ behavior: 'deny', message: text || 'The user denied this tool call.' });

  if (p.toolName === 'AskUserQuestion')
    return (
      <QuestionCard
        prompt={p}
        canAnswer={canAnswer}
        onAnswer={(answers) => send({ behavior: 'allow', updatedInput: { ...p.input, answers } })}
        onDismiss={() => deny('The user dismissed the question.')}
      />
    );
  return (
    // biome-ignore lint/a11y/useSemanticElements: a card with a group's name, not a form's fieldset (its buttons act at once)
    <div
      ref={card}
      tabIndex={-1}
      class="permission card"
      role="group"
      aria-label={`Permission for ${p.toolName}`}
      data-testid="permission-card"
    >
      <div class="perm-title">
        Permission needed{p.turn && <span data-testid="prompt-turn">: {promptTurnText(p.toolName, p.turn, session.principal)}</span>}
      </div>
      <ToolSummary name={p.toolName} input={p.input} />
      {typeof p.request.description === 'string' && <div class="muted small">{p.request.description}</div>}
      <div class="muted small" data-testid="answerers">
        {who.length ? `Who may answer: ${who.join(', ')} (the first answer counts)` : 'Waiting for a controller to attach.'}
      </div>
      {canAnswer ? (
        <>
          <div class="actions">
            <button type="button" class="primary" onClick={allow}>
              Allow
            </button>
            {rule && (
              <button type="button" onClick={() => allowSession(rule)} data-testid="allow-rule">
                Allow <code>{rule.rules.map(ruleLabel).join(', ')}</code> for this session
              </button>
            )}
            <button type="button" class="danger" onClick={() => deny()}>
              Deny
            </button>
            <button type="button" onClick={() => setDenying(!denying)} aria-expanded={denying}>
              Deny with message…
            </button>
          </div>
          {denying && (
            <form
              class="deny-form"
              onSubmit={(e) => {
                e.preventDefault();
                void deny(message.trim());
              }}
            >
              <label>
                Message for the model
                <input name="deny-message" value={message} onInput={(e) => setMessage((e.target as HTMLInputElement).value)} />
              </label>
              <button type="submit" class="danger">
                Deny
              </button>
            </form>
          )}
        </>
      ) : (
        <div class="muted small">Waiting for a controller to answer.</div>
      )}
      {error && (
        <div class="error" role="alert">
          {error}
        </div>
      )}
    </div>
  );
}

function QuestionCard(props: {
  prompt: PermissionPrompt;
  canAnswer: boolean;
  onAnswer: (a: Record<string, string>) => void;
  onDismiss: () => void;
}) {
  const questions = (Array.isArray(props.prompt.input.questions) ? props.prompt.input.questions : []) as Question[];
  const [picked, setPicked] = useState<Record<string, string[]>>({});
  const [free, setFree] = useState<Record<string, string>>({});
  const answerOf = (q: Question) => free[q.question]?.trim() || (picked[q.question] ?? []).join(', ');
  const complete = questions.every((q) => answerOf(q));
  const toggle = (q: Question, label: string) => {
    const cur = picked[q.question] ?? [];
    const next = q.multiSelect ? (cur.includes(label) ? cur.filter((l) => l !== label) : [...cur, label]) : [label];
    setPicked({ ...picked, [q.question]: next });
  };
  const submit = (e: Event) => {
    e.preventDefault();
    if (complete) props.onAnswer(Object.fromEntries(questions.map((q) => [q.question, answerOf(q)])));
  };
  return (
    <form class="permission question card" onSubmit={submit} data-testid="question-card" aria-label="Question from the model">
      {questions.map((q, qi) => (
        <fieldset key={qi} disabled={!props.canAnswer}>
          <legend>
            {q.header && <span class="chip">{q.header}</span>} {q.question}
          </legend>
          <div class="options">
            {q.options.map((o) => (
              <button
                type="button"
                key={o.label}
                class={(picked[q.question] ?? []).includes(o.label) ? 'option picked' : 'option'}
                aria-pressed={(picked[q.question] ?? []).includes(o.label)}
                onClick={() => toggle(q, o.label)}
              >
                <strong>{o.label}</strong>
                {o.description && <span class="muted small"> {o.description}</span>}
              </button>
            ))}
          </div>
          <label class="small">
            Or your own answer
            <input
              name={`free-${qi}`}
              value={free[q.question] ?? ''}
              onInput={(e) => setFree({ ...free, [q.question]: (e.target as HTMLInputElement).value })}
            />
          </label>
        </fieldset>
      ))}
      {props.canAnswer ? (
        <div class="actions">
          <button type="submit" class="primary" disabled={!complete}>
            Answer
          </button>
          <button type="button" onClick={props.onDismiss}>
            Dismiss
          </button>
        </div>
      ) : (
        <div class="muted small">Waiting for a controller to answer.</div>
      )}
    </form>
  );
}
