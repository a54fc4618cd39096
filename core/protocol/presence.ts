import type { PresenceChange } from './events.js';

/**
 * Every change a `presence` event carries, in the order they happened: the one at its top
 * level, then `more` (the gateway coalesces a burst of changes into one event). Free of zod,
 * so the web client's bundle can use it too.
 */
export function presenceChanges(e: PresenceChange & { more?: readonly PresenceChange[] }): PresenceChange[] {
  const { action, principal, client_id, role } = e;
  return [{ action, principal, client_id, role }, ...(e.more ?? [])];
}
