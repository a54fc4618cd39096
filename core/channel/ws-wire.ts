/** What both ends of a Tether WebSocket agree on: where it is opened, and how often it is pinged. */

/** Where the gateway accepts WebSocket connections and dialers open them (a bare ws://HOST:PORT means this path). */
export const WS_PATH = '/v1/connect';

/**
 * The protocol-level ping both ends send unless told otherwise (a backstop under the
 * application heartbeat): every `intervalMs`, and a socket silent `timeoutMs` after a ping is
 * declared dead.
 */
export const WS_PING_DEFAULTS = { intervalMs: 15_000, timeoutMs: 10_000 } as const;
