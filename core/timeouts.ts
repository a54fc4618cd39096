/**
 * The waits of a session create, innermost first, in one place because their order matters:
 * each outer wait must outlast the ones it contains, so the innermost that gives up is the one
 * that reports (the agent's "engine did not answer initialize", not a client's bare timeout).
 * Each is derived from the one it waits on; {@link CREATE_WAIT_ORDER} lists them for the test.
 * The agent's initializeTimeoutMs and the gateway's limits.agentWaitMs can be configured: the
 * order holds for the defaults, and an operator raising one should raise the outer ones.
 */

/** The agent: a new engine must answer initialize within this (default of initializeTimeoutMs). */
export const ENGINE_START_TIMEOUT_MS = 60_000;

/** The agent's own work around an engine start: spawning the process, checking its folder, the reply's trip. */
const AGENT_SPAWN_OVERHEAD_MS = 10_000;

/** The gateway waits this long for an agent's answer to agent.spawn: the engine start and the agent's own work. */
export const SPAWN_WAIT_MS = ENGINE_START_TIMEOUT_MS + AGENT_SPAWN_OVERHEAD_MS;

/** The gateway: a create or stop for an agent whose link dropped waits this long for it (default of limits.agentWaitMs). */
export const AGENT_WAIT_MS = 30_000;

/** A cluster gateway's own round trip to another gateway (its call timeout). */
export const CLUSTER_CALL_MS = 15_000;

/** A cluster gateway waits this long for a create it forwarded to the gateway holding the agent: that gateway's spawn wait and the hop. */
export const CLUSTER_CREATE_WAIT_MS = SPAWN_WAIT_MS + CLUSTER_CALL_MS;

/** A client's reconnect and retry of a create whose link dropped (one backoff step and a new hello). */
const CLIENT_RETRY_MARGIN_MS = 10_000;

/**
 * The client waits this long for session.create, across reconnects: the gateway may wait for
 * the agent to come back and then for the spawn, or forward the create to another gateway.
 */
export const CLIENT_CREATE_WAIT_MS = Math.max(AGENT_WAIT_MS + SPAWN_WAIT_MS, CLUSTER_CREATE_WAIT_MS) + CLIENT_RETRY_MARGIN_MS;

/** The nested waits of a create, each containing the ones before it: their values must strictly increase. */
export const CREATE_WAIT_ORDER: ReadonlyArray<readonly [string, number]> = [
  ['agent: engine start (initialize)', ENGINE_START_TIMEOUT_MS],
  ['gateway: agent.spawn answer', SPAWN_WAIT_MS],
  ['gateway: agent comes back, then agent.spawn answer', AGENT_WAIT_MS + SPAWN_WAIT_MS],
  ['client: session.create answer', CLIENT_CREATE_WAIT_MS],
];

/** The cluster's forwarded create sits between the spawn wait and the client's wait. */
export const CLUSTER_CREATE_WAIT_ORDER: ReadonlyArray<readonly [string, number]> = [
  ['gateway: agent.spawn answer', SPAWN_WAIT_MS],
  ['cluster: forwarded session.create answer', CLUSTER_CREATE_WAIT_MS],
  ['client: session.create answer', CLIENT_CREATE_WAIT_MS],
];
