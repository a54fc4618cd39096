/**
 * The paths of the gateway's HTTP port that clients reach (docs/protocol.md): one definition
 * for the listeners that serve them and the dialers that open them.
 */

/** Where agents and clients open their WebSocket (a bare ws://HOST:PORT means this path). */
export const WS_PATH = '/v1/connect';
/** POST: a one-time browser ticket for a client token. */
export const TICKET_PATH = '/v1/ticket';
/** POST: a web sign-in code traded for a client token (GET: whether sign-in by link is on). */
export const LOGIN_PATH = '/v1/login';
