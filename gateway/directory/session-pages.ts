import { SESSIONS_PAGE_DEFAULT, type ParamsOf, type ResultOf, type SessionInfo } from '../../core/protocol/methods.js';
import { listedOptions } from '../../core/protocol/session-options.js';

/**
 * A `sessions.list` answer from every session the caller may see (docs/protocol.md, "Listing
 * sessions"): ordered by id, each with only its listed options (cwd, model, permission_mode).
 * With `limit` or `cursor`, one page after `cursor` (the last id of the page before) and
 * `next_cursor` while more follow; without either, all of them (the old form).
 */
export function sessionsPage(
  all: readonly SessionInfo[],
  params: Exclude<ParamsOf<'sessions.list'>, undefined>,
): ResultOf<'sessions.list'> {
  const sorted = all.map((s) => ({ ...s, options: listedOptions(s.options) })).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (params.limit === undefined && params.cursor === undefined) return { sessions: sorted };
  const cursor = params.cursor;
  const after = cursor === undefined ? sorted : sorted.filter((s) => s.id > cursor);
  const page = after.slice(0, params.limit ?? SESSIONS_PAGE_DEFAULT);
  return page.length < after.length ? { sessions: page, next_cursor: page[page.length - 1].id } : { sessions: page };
}
