import { z } from 'zod';
import { TITLE_MAX_CHARS } from './titles.js';

/**
 * What waits for one person across the fleet ("needs you", issue 33): the answer of
 * `inbox.list`, shared by the gateway (which builds it), the library, `tether inbox` and the web page.
 */

/** A session title as the owner may set it: trimmed, one line, not empty, bounded. */
export const SessionTitle = z
  .string()
  .transform((t) => t.replace(/\s+/g, ' ').trim())
  .pipe(z.string().min(1, 'a title needs at least one visible character').max(TITLE_MAX_CHARS));

/**
 * Why something waits for the person: a permission prompt or a question they may answer, or a
 * session of theirs that ended or lost its agent.
 */
export const InboxKind = z.enum(['permission', 'question', 'ended', 'agent_lost']);
export type InboxKind = z.infer<typeof InboxKind>;

export const InboxItem = z.object({
  kind: InboxKind,
  session_id: z.string(),
  agent: z.string(),
  owner: z.string(),
  /** The owner's display name from the identity provider, where known. */
  owner_name: z.string().optional(),
  title: z.string().optional(),
  /** The gateway that holds the session (in a cluster). */
  gateway: z.string().optional(),
  /** Since when it waits (ISO time): the prompt's raising, the end, the agent's loss. */
  at: z.string(),
  /** For prompts: the engine's request id (answering it is a control_response to it). */
  request_id: z.string().optional(),
  /** For prompts: the tool asked about. */
  tool: z.string().optional(),
});
export type InboxItem = z.infer<typeof InboxItem>;

/** Newest first; ties by session id then request id, so every gateway orders alike. */
export function newestFirst(items: InboxItem[]): InboxItem[] {
  return [...items].sort(
    (a, b) =>
      b.at.localeCompare(a.at) || a.session_id.localeCompare(b.session_id) || (a.request_id ?? '').localeCompare(b.request_id ?? ''),
  );
}
