/**
 * How a turn and an approvers entry are named, for people and for the gateway alike. Without
 * zod on purpose: the web page imports it (client/turn-view.ts), and zod would triple its load.
 */

/** The prefix of an approvers entry naming a group of the policy file. */
export const GROUP_PREFIX = 'group:';

/** "bob's turn", "bob and carol's turn", "a turn whose author is not known". */
export function turnName(authors: readonly string[], viewer?: string): string {
  if (authors.length === 0) return 'a turn whose author is not known';
  if (viewer !== undefined && authors.includes(viewer)) return 'your turn';
  return `${authors.length === 1 ? authors[0] : `${authors.slice(0, -1).join(', ')} and ${authors.at(-1)}`}'s turn`;
}
