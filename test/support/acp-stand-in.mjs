// A small ACP agent for tests, on the official SDK's agent side: it cannot load sessions
// (agentCapabilities.loadSession false), offers the modes default and plan, and answers each
// prompt with "echo: <text>"; "run: CMD" runs CMD in a client terminal and "read: PATH" reads
// a file through the client, each answering with what came back (or the client's error).
// Enough to check what the ACP engine says, answers and refuses without a model.
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';

let waiting = () => {};
const modes = [
  { id: 'default', name: 'Default' },
  { id: 'plan', name: 'Plan' },
];
acp
  .agent({ name: 'stand-in' })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: 'stand-in', version: '0.0.1' },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: 'stand-in-1', modes: { currentModeId: 'default', availableModes: modes } }))
  .onRequest(acp.methods.agent.session.setMode, async ({ params, client }) => {
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: 'current_mode_update', currentModeId: params.modeId },
    });
    return {};
  })
  .onNotification(acp.methods.agent.session.cancel, () => waiting())
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const text = params.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('');
    let reply = `echo: ${text}`;
    try {
      if (text.startsWith('wait: ')) {
        // A long turn that session/cancel ends.
        const cancelled = await new Promise((resolve) => {
          const t = setTimeout(() => resolve(false), Number(text.slice(6)));
          waiting = () => {
            clearTimeout(t);
            resolve(true);
          };
        });
        if (cancelled) return { stopReason: 'cancelled' };
      } else if (text.startsWith('run: ')) {
        const t = await client.createTerminal({ sessionId: params.sessionId, command: text.slice(5) });
        const exit = await t.waitForExit();
        reply = `exit ${exit.exitCode}: ${(await t.currentOutput()).output}`;
        await t.release();
      } else if (text.startsWith('read: ')) {
        reply = `read: ${(await client.request(acp.methods.client.fs.readTextFile, { sessionId: params.sessionId, path: text.slice(6) })).content}`;
      }
    } catch (err) {
      reply = `refused: ${err.message}`;
    }
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: reply } },
    });
    return { stopReason: 'end_turn' };
  })
  .connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
