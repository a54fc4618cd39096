/**
 * Our gateway as a bench child: the routing core and its WebSocket + gRPC listeners on
 * 127.0.0.1 (ports picked by the OS), authentication off. Limits that would refuse the
 * benchmark's own load (members per session, sessions per principal, connections per gateway
 * and per address: every bench client comes from 127.0.0.1) are raised; everything else is
 * the default. Answers cpu / mem / stats over IPC.
 */
import { Gateway } from '../../dist/gateway/gateway.js';
import { startGatewayServer } from '../../dist/gateway/server.js';
import { serve } from '../lib/child.mjs';

const gateway = new Gateway({
  limits: {
    maxMembers: 20_000,
    maxSessionsPerPrincipal: 1_000_000,
  },
});
const server = await startGatewayServer(gateway, {
  host: '127.0.0.1',
  port: 0,
  grpcPort: 0,
  doorLimits: { maxConnections: 1_000_000, maxConnectionsPerAddress: 1_000_000 },
});

const { ready } = serve(
  {
    stats: () => ({ sessions: gateway.directory.sessions.size, agents: gateway.directory.agents.size, clients: gateway.directory.clients.size }),
  },
  { onExit: () => server.close() },
);
ready({ url: server.url, grpcUrl: server.grpcUrl });
