import type { Role } from './events.js';

/**
 * What the gateway tells people away from their tab (issue #33): one definition, read by the
 * gateway's notifier, the webhook shapes, the web page's settings and its service worker.
 */
export const ATTENTION_TYPES = ['permission_request', 'question', 'turn_complete', 'session_ended', 'agent_lost', 'budget'] as const;

export type AttentionType = (typeof ATTENTION_TYPES)[number];

/** Each type's title, as a notification, a chat message or an ntfy push shows it. */
export const ATTENTION_TITLES: Record<AttentionType, string> = {
  permission_request: 'Permission needed',
  question: 'Question waiting',
  turn_complete: 'Turn finished',
  session_ended: 'Session ended',
  agent_lost: 'Agent lost',
  budget: 'Budget',
};

/** Who may answer a prompt: these principals, or anyone holding one of these roles on the session. */
export interface MayAnswer {
  principals: string[];
  roles: Role[];
}

/**
 * One thing that needs a person. `id` is stable: the same prompt (or turn end, ending, loss)
 * derived again, or sent again after a failure, carries the same id, so a receiver shows it once.
 * Never carries tool input: `summary` is a short line anyone who may see the session may read.
 */
export interface AttentionEvent {
  id: string;
  type: AttentionType;
  session_id: string;
  agent: string;
  /** ISO time the gateway saw it. */
  at: string;
  /** Prompts: the engine's request id (what an answer names) and the tool asked about. */
  request_id?: string;
  tool?: string;
  may_answer?: MayAnswer;
  summary: string;
}

/** A push payload as one person receives it: the event, and whether they may answer it from the notification. */
export interface AttentionPush extends AttentionEvent {
  /** True when the person who receives it may answer (the notification then offers Allow and Deny). */
  answerable: boolean;
}

/**
 * A message the page (or a test) may post to the service worker to run its notification-click
 * handler for the notification with this tag: DevTools has no way to click a notification.
 */
export const NOTIFICATION_CLICK_MESSAGE = 'tether:notificationclick';
