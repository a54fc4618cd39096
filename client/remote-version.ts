import { TetherError } from '../core/errors.js';
import type { RemoteEngineTarget } from './remote-engine.js';
import { GatewayClient } from './gateway-client.js';

/** Bound on the whole lookup: SDKs give `claude -v` about 2 s. */
export const VERSION_LOOKUP_TIMEOUT_MS = 1_800;

/**
 * The remote engine's `--version` line, exactly as the CLI prints it (e.g. `2.1.332 (Claude
 * Code)`), as the agent reported it in its hello: one connection, `agents.list`, closed
 * again. NOT_FOUND when the agent is not connected, FAILED_PRECONDITION when it did not
 * report that engine's version, DEADLINE_EXCEEDED past `timeoutMs`.
 */
export async function remoteEngineVersion(target: RemoteEngineTarget, timeoutMs = VERSION_LOOKUP_TIMEOUT_MS): Promise<string> {
  let client: GatewayClient | undefined;
  let timer: NodeJS.Timeout | undefined;
  const lookup = (async () => {
    client = await GatewayClient.connect({
      gateway: target.gateway,
      token: target.token,
      dial: target.dial,
      dialers: target.dialers,
      logger: target.logger,
      reconnect: false,
      software: target.software ?? 'tether-claude',
    });
    const agent = (await client.listAgents()).find((a) => a.name === target.agent);
    if (!agent) throw new TetherError('NOT_FOUND', `agent "${target.agent}" is not connected to the gateway`);
    const engine = target.engine ?? agent.default_engine;
    const version = agent.engine_versions?.[engine];
    if (!version)
      throw new TetherError('FAILED_PRECONDITION', `agent "${target.agent}" did not report the version of its "${engine}" engine`);
    return version;
  })();
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TetherError('DEADLINE_EXCEEDED', `no answer from the gateway within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([lookup, deadline]);
  } finally {
    clearTimeout(timer);
    lookup.catch(() => {}).finally(() => void client?.close());
  }
}
