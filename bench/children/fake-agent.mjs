/**
 * An agent that speaks our protocol but runs no engines: it answers agent.spawn at once.
 * Used only to measure the gateway's own memory per idle session at 1,000 and 10,000
 * sessions, where real engines (one process each) would not fit on the machine. The
 * agent's own cost per session is measured separately with the real agent.
 *
 *   --gateway ws://… --name <agent name>
 */
import { argsOf, serve } from '../lib/child.mjs';
import { connectWire } from '../lib/wire.mjs';

const a = argsOf();
let spawned = 0;
const wire = await connectWire(a.gateway, {
  role: 'agent',
  agent: { name: a.name ?? 'fake', host: 'bench', engines: ['claude'], default_engine: 'claude', labels: {}, sessions: [] },
  onRequest: (method) => {
    if (method === 'agent.spawn') {
      spawned++;
      return { pid: 1, engine: 'claude', engine_version: 'fake' };
    }
    return {};
  },
});
const { ready } = serve({ stats: () => ({ spawned }) }, { onExit: () => wire.close() });
ready({});
