import { randomUUID } from 'node:crypto';
import type { AgentConnector } from '@agentclientprotocol/sdk';
import type { Channel } from '../core/channel/channel.js';
import { TetherError } from '../core/errors.js';
import { Dialers } from '../core/link/dial.js';
import type { AcpLink } from '../gateway/listen/listen-acp.js';

const SCHEME = 'tether-loopback:';

/**
 * The gateway's `/acp` endpoint (experimental): each admitted connection gets the ACP agent
 * of `tether acp`, whose gateway client dials an in-memory channel into this same gateway
 * as the connection's principal (what its token or ticket said; nothing more). The URL's
 * query names the Tether agent and the remote folder: `/acp?agent=NAME&cwd=DIR`. The agent's
 * code (and the SDK under it) is loaded at the first connection, as the listener's is.
 */
export function acpEndpoint(): (link: AcpLink) => Promise<AgentConnector> {
  /** In-process links from `/acp` connections into the gateway serving them, by loopback id. */
  const loopbacks = new Map<string, () => Channel>();
  // Its clients dial this gateway in-process, and nothing else.
  const dialers = new Dialers([
    [
      SCHEME,
      async (url) => {
        const open = loopbacks.get(url.host);
        if (!open) throw new TetherError('UNAVAILABLE', 'the ACP connection is closed');
        return open();
      },
    ],
  ]);
  return async (link) => {
    const [{ tetherAcpAgent }, { GatewayClient }] = await Promise.all([
      import('../client/acp/acp-agent.js'),
      import('../client/gateway-client.js'),
    ]);
    const query = new URL(link.path, 'http://acp').searchParams;
    const id = randomUUID();
    loopbacks.set(id, link.open);
    return tetherAcpAgent({
      agent: query.get('agent') ?? undefined,
      cwd: query.get('cwd') ?? undefined,
      client: () => GatewayClient.connect({ gateway: `${SCHEME}//${id}`, dialers, software: 'tether-acp-endpoint', reconnect: false }),
      onClosed: () => loopbacks.delete(id),
    });
  };
}
