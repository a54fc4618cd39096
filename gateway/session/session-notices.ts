/**
 * What a session tells whoever listens for things a person away from the tab may need (the
 * attention room, gateway/attention/): a prompt people must answer (never one a policy, a
 * standing rule or a hook answered), its settling, a finished turn, the end, the agent lost.
 * Told once per occurrence in this process; a restored session tells nothing of its past.
 */
export type SessionNotice =
  | {
      kind: 'prompt';
      requestId: string;
      tool: string;
      /** A tool whose answer is a person's input (AskUserQuestion): a question, not a permission. */
      interactive: boolean;
      /** Set when the turn's approval names who may answer (core/policy/turn-approval.ts); else any controller. */
      mayAnswer?: string[];
    }
  | { kind: 'prompt_settled'; requestId: string; how: string }
  | { kind: 'turn_complete'; seq: number; subtype?: string }
  | { kind: 'ended'; reason?: string }
  /** `seq`: the last frame of the session's history then (a loss after a return is another loss). */
  | { kind: 'agent_lost'; seq: number };

/** Where a session's notices go; `sessionId` names it (the listener looks the session up for members and roles). */
export type NoticeSink = (sessionId: string, notice: SessionNotice) => void;
