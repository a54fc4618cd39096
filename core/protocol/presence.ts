import type { PresenceChange } from './events.js';

/** An entry of a presence event's `more`: fields left out are those of the change before it. */
export type PresenceMore = Pick<PresenceChange, 'client_id'> & Partial<PresenceChange>;

/**
 * Every change a `presence` event carries, in the order they happened: the one at its top
 * level, then `more` (the gateway coalesces a burst of changes into one event), each entry
 * completed from the change before it. Free of zod, so the web client's bundle can use it too.
 */
export function presenceChanges(e: PresenceChange & { more?: readonly PresenceMore[] }): PresenceChange[] {
  const { action, principal, client_id, role, may_control, name } = e;
  const out: PresenceChange[] = [{ action, principal, client_id, role, ...mayControl(may_control), ...nameOf(name) }];
  for (const m of e.more ?? []) {
    const prev = out[out.length - 1];
    out.push({
      action: m.action ?? prev.action,
      principal: m.principal ?? prev.principal,
      client_id: m.client_id,
      role: m.role ?? prev.role,
      ...mayControl(m.may_control ?? prev.may_control),
      // A name belongs to its principal: inherited only while the principal is the same.
      ...nameOf(m.name ?? (m.principal === undefined ? prev.name : undefined)),
    });
  }
  return out;
}

const mayControl = (v: boolean | undefined) => (v === undefined ? {} : { may_control: v });
const nameOf = (v: string | undefined) => (v === undefined ? {} : { name: v });

/** The `more` of an event whose first change is `first`: each entry without the fields it shares with the change before it. */
export function compactMore(first: PresenceChange, rest: readonly PresenceChange[]): PresenceMore[] {
  let prev = first;
  return rest.map((c) => {
    const m: PresenceMore = { client_id: c.client_id };
    if (c.action !== prev.action) m.action = c.action;
    if (c.principal !== prev.principal) m.principal = c.principal;
    if (c.role !== prev.role) m.role = c.role;
    if (c.may_control !== prev.may_control && c.may_control !== undefined) m.may_control = c.may_control;
    if (c.name !== undefined && (c.name !== prev.name || c.principal !== prev.principal)) m.name = c.name;
    prev = c;
    return m;
  });
}
