/** A display name a token may carry (`name` claim): 1-128 printable characters. */
export const DISPLAY_NAME = /^[^\u0000-\u001f\u007f]{1,128}$/;

/**
 * Who is on the other end of a connection, as established at the door (listener + auth).
 * Routing decides with this and never with anything the peer claims in a message. Built
 * from a verified token (see verify.ts and scopes.ts), or ANONYMOUS when auth is off.
 */
export interface Principal {
  /** Subject: a person, service or agent name. Shown in presence and audit. */
  sub: string;
  /** A display name from the identity provider (`name` claim), where one is known; audit keeps `sub`. */
  name?: string;
  /** Which hello role this principal may take. */
  kind: 'agent' | 'client' | 'any';
  /** For agent principals: the one agent name it may register as (undefined: any). */
  agentName?: string;
  /** For client principals: what it may do. */
  canCreate: boolean;
  canControl: boolean;
  canAdmin: boolean;
  /** Agents this client may open or see sessions on; undefined means all. */
  agents?: string[];
}
