import type { SessionState } from '../../core/protocol/events.js';
import type { LineMeta } from '../../core/protocol/methods.js';

/**
 * A session's state (starting, idle, running, requires_action, unresponsive, agent-lost,
 * ended) and the rules that move it. Every change is announced once; `unresponsive` sticks
 * until the engine answers what it owes, and the state it would be in meanwhile is kept for then.
 */
export class SessionStatus {
  private state: SessionState = 'starting';
  /** The state to go back to once an unresponsive engine answers again. */
  private answeringState: SessionState = 'idle';
  /** The state the session was in when its agent was lost (kept until the next loss). */
  private lostFrom: SessionState | undefined;

  constructor(private readonly announce: (state: SessionState) => void) {}

  get current(): SessionState {
    return this.state;
  }

  /** A state read back from history after a restart: taken as it is, not announced again. */
  restore(state: SessionState): void {
    if (state === 'agent-lost' && this.state !== 'agent-lost') this.lostFrom = this.state;
    this.state = state;
  }

  /** Whether a turn was under way when the agent was lost (its engine died with it: the turn was cut short). */
  get turnCutShort(): boolean {
    return this.lostFrom === 'running' || this.lostFrom === 'requires_action' || this.lostFrom === 'unresponsive';
  }

  /** `answering`: the change comes from the engine answering again (it may leave `unresponsive`). */
  set(state: SessionState, answering = false): void {
    if (this.state === state) return;
    if (this.state === 'unresponsive' && !answering && state !== 'agent-lost' && state !== 'ended') {
      this.answeringState = state;
      return;
    }
    if (state === 'agent-lost') this.lostFrom = this.state;
    this.state = state;
    this.announce(state);
  }

  /** Follows one engine line: requires_action while prompts wait, idle after a result, running on activity. */
  follow(meta: LineMeta, promptsPending: boolean): void {
    if (meta.type === 'system' && meta.subtype === 'session_state_changed') return; // the engine's own view; ours follows prompts
    if (promptsPending) this.set('requires_action');
    else if (meta.type === 'result') this.set('idle');
    else if (meta.type === 'system' || meta.type === 'assistant' || meta.type === 'stream_event' || meta.type === 'control_cancel_request')
      this.set('running');
  }

  /** The engine left a request unanswered: unresponsive until {@link caughtUp}. */
  unresponsive(): void {
    this.answeringState = this.state;
    this.set('unresponsive', true);
  }

  /** The engine answered everything overdue: back to the state it would be in. */
  caughtUp(): void {
    if (this.state === 'unresponsive') this.set(this.answeringState, true);
  }
}
