// A minimal MCP server on stdio (newline-delimited JSON-RPC) with one resource, for tests of
// what the CLI does with an @server:uri mention. Its text is argv[2]; its URI is memo://note.
import { createInterface } from 'node:readline';

const text = process.argv[2] ?? 'MCP_RESOURCE';
const RESOURCE = { uri: 'memo://note', name: 'note', mimeType: 'text/plain' };
const answer = (id, result) => process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id, result })}\n`);

createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.id === undefined) return; // notifications
  switch (m.method) {
    case 'initialize':
      return answer(m.id, {
        protocolVersion: m.params?.protocolVersion ?? '2025-06-18',
        capabilities: { resources: {} },
        serverInfo: { name: 'memo', version: '1.0.0' },
      });
    case 'resources/list':
      return answer(m.id, { resources: [RESOURCE] });
    case 'resources/read':
      return answer(m.id, { contents: [{ ...RESOURCE, text }] });
    case 'tools/list':
      return answer(m.id, { tools: [] });
    case 'prompts/list':
      return answer(m.id, { prompts: [] });
    case 'resources/templates/list':
      return answer(m.id, { resourceTemplates: [] });
    default:
      return process.stdout.write(
        `${JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'method not found' } })}\n`,
      );
  }
});
