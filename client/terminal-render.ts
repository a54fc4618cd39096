import { worktreeText } from './worktree-view.js';
import type { TetherEvent } from '../core/protocol/events.js';
import { presenceChanges } from '../core/protocol/presence.js';
import { grantedRules, ruleLabel } from './permission-policy.js';
import { grantedForText, promptTurnText } from './turn-view.js';
import { policyLine, viewTool } from './tool-view.js';
import { queueChangeText, stopText } from './queue-view.js';

/** Diff lines a tool call shows at most in the terminal; the rest is counted. */
const MAX_TERMINAL_DIFF_LINES = 20;
/** Presence changes of one event (a burst of attaches) named in its line; the rest are counted. */
const MAX_PRESENCE_SHOWN = 5;

/**
 * Removes escape sequences and control characters (C0, DEL, C1, zero-width and bidi marks) from
 * untrusted text (tool names, output, audit records); keeps tabs and newlines.
 */
export function sanitize(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e]/g, '');
}

/** One line, at most `max` characters, for tool input and output. */
export function oneLine(value: unknown, max = 160): string {
  const text = sanitize(typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? flat.slice(0, max - 3) + '...' : flat;
}

/** ANSI styling that turns itself off when the output is not a terminal. */
export function styles(enabled: boolean) {
  const wrap = (open: string) => (s: string) => (enabled ? `\x1b[${open}m${s}\x1b[0m` : s);
  return { dim: wrap('2'), bold: wrap('1'), yellow: wrap('33'), red: wrap('31'), green: wrap('32'), cyan: wrap('36') };
}

/** A tool call on one line, as the web page reads it too: `Bash: ls -la`, `Read: src/app.ts`. */
export function toolLine(name: string, input: Record<string, unknown> | undefined, s: ReturnType<typeof styles>): string {
  const v = viewTool(name, input);
  return `${s.yellow(`${sanitize(v.name)}:`)} ${oneLine(v.summary, 200)}`;
}

/** The diff of a file edit (Edit, MultiEdit, Write), at most 20 lines, indented; none for other tools. */
export function diffLines(name: string, input: Record<string, unknown> | undefined, s: ReturnType<typeof styles>): string[] {
  const diff = viewTool(name, input).diff ?? [];
  const shown = diff.slice(0, MAX_TERMINAL_DIFF_LINES).map((l) => {
    const text = `  ${l.op} ${sanitize(l.text)}`;
    return l.op === '+' ? s.green(text) : l.op === '-' ? s.red(text) : s.dim(text);
  });
  if (diff.length > MAX_TERMINAL_DIFF_LINES) shown.push(s.dim(`  … ${diff.length - MAX_TERMINAL_DIFF_LINES} more lines`));
  return shown;
}

/**
 * A person as the terminal names them: the identity provider's display name with the stable
 * subject beside it ("Bob Brown (bob)"), or the subject alone when no name is known.
 */
export function personLabel(p: { principal: string; name?: string }): string {
  return p.name !== undefined && p.name !== p.principal ? `${p.name} (${p.principal})` : p.principal;
}

/** A human line for a gateway event, or undefined for events not worth a line. */
export function describeEvent(e: TetherEvent): string | undefined {
  switch (e.subtype) {
    case 'presence': {
      const changes = presenceChanges(e);
      const shown = changes
        .slice(0, MAX_PRESENCE_SHOWN)
        .map((c) => (c.action === 'role_changed' ? `${personLabel(c)} is now ${c.role}` : `${personLabel(c)} ${c.action} (${c.role})`));
      const rest = changes.length - shown.length;
      return `* ${shown.join(', ')}${rest > 0 ? ` and ${rest} more` : ''}`;
    }
    case 'state':
      return e.state === 'agent-lost'
        ? '* the agent link is down; the engine keeps running'
        : e.state === 'ended'
          ? '* session ended'
          : undefined;
    case 'exited':
      return `* engine exited (code ${e.code}, signal ${e.signal})${e.reason ? `: ${e.reason}` : ''}`;
    case 'engine_error':
      return `* engine error ${e.code}: ${e.message}`;
    case 'gap':
      return `* ${e.message}`;
    case 'prompt_decided': {
      if (e.rule) return `* ${sanitize(e.decided_by)}'s standing rule ${sanitize(e.rule)} answered ${e.behavior}`;
      const rules = grantedRules(e.updated_permissions).map(ruleLabel);
      return `* ${e.decided_by} answered ${e.behavior}${rules.length ? `, and allowed ${sanitize(rules.join(', '))} for the rest of this session, for ${sanitize(grantedForText(e.granted_for, e.decided_by))}` : ''}`;
    }
    case 'prompt_turn':
      return `* ${sanitize(promptTurnText(e.tool, e))}`;
    case 'rule_withdrawn':
      return `* ${e.withdrawn_by} withdrew ${sanitize(e.rule)}: it asks again`;
    case 'policy_decision':
      return `* ${policyLine(e.decision, sanitize(e.tool))} (rule ${sanitize(e.rule)})`;
    case 'interrupt':
      return `* ${sanitize(stopText(e.principal, e.cleared))}`;
    case 'queued': {
      const text = queueChangeText(e.change);
      return text && `* ${sanitize(text)}`;
    }
    case 'engine_resumed':
      return `* ${sanitize(e.message)}`;
    case 'worktree':
      return `* ${sanitize(worktreeText(e.worktree))}`;
    case 'owner_changed':
      return `* ${sanitize(e.previous_owner)} handed the session to ${sanitize(e.owner)}`;
    case 'title_changed':
      return `* ${sanitize(e.by)} named the session ${JSON.stringify(sanitize(e.title))}`;
    case 'budget':
      return `* ${sanitize(e.principal)}: ${sanitize(e.message)}`;
    case 'link':
      return `* ${e.message}`;
    case 'error':
      return `* error ${e.code}: ${e.message}`;
    default:
      return undefined;
  }
}
