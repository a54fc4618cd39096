/**
 * Engine lines reach clients byte for byte on every route (the library, pipe mode and the SDK
 * drop-in, over WebSocket and gRPC), from a stand-in engine whose lines JSON.stringify would
 * never write: spaces after colons, unusual key order, \u00e9 and \/ escapes, and a ~16 MiB line.
 * Re-serializing anywhere on the path (agent, gateway, store, client) fails these tests.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionItem } from '../client/remote-session.js';
import { runTether } from './support/cli.js';
import { isEngineItem, isResult, jsonAt, until } from './support/items.js';
import { startStack, withTimeout, type Stack } from './support/stack.js';
// @ts-expect-error -- a plain .mjs module shared with the stand-in engine
import { oddTurn } from './support/odd-json-lines.mjs';

const ENGINE = fileURLToPath(new URL('./support/odd-json-engine.mjs', import.meta.url));
const TETHER_CLAUDE = fileURLToPath(new URL('../dist/bin/tether-claude.js', import.meta.url));
const expected = (prompt: string, big: boolean): string[] => oddTurn(prompt, big);
const userLine = (text: string) =>
  JSON.stringify({ type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' });

/** Output lines of a child that are not Tether's own events. */
const engineLines = (stdout: string) => stdout.split('\n').filter((l) => l && !l.startsWith('{"type":"tether"'));

/** Runs tether-claude with one user message and closes stdin; resolves with its stdout, bounded. */
function dropIn(env: Record<string, string | undefined>, prompt: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return withTimeout(
    new Promise((resolve) => {
      const args = ['--output-format', 'stream-json', '--verbose', '--input-format', 'stream-json'];
      const child = spawn(process.execPath, [TETHER_CLAUDE, ...args], {
        env: { PATH: process.env.PATH, ...env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const out: Buffer[] = [];
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => out.push(d));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr }));
      // Keep stdin open until the turn's result is out, as the SDK does.
      const watch = setInterval(() => {
        if (Buffer.concat(out).includes('"type":"result"')) {
          clearInterval(watch);
          child.stdin.end();
        }
      }, 20);
      child.stdin.write(userLine(prompt) + '\n');
    }),
    60_000,
    'tether-claude to finish',
  );
}

describe.each(['ws', 'grpc'] as const)('engine lines byte for byte over %s', (transport) => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ engine: 'claude', engineCommand: ENGINE, clientTransport: transport, agentTransport: transport });
  });
  afterAll(() => stack?.stop());

  it('the library: each line as the engine wrote it (a 16 MiB one included), parsed only when asked', async () => {
    const session = await (await stack.client()).createSession({ agent: 'test-agent' });
    const items: SessionItem[] = [];
    await session.sendUserMessage('library big');
    await until(session[Symbol.asyncIterator](), isResult, items, 60_000, 'the result');
    const lines = items
      .filter((i): i is Extract<SessionItem, { kind: 'engine' }> => i.kind === 'engine' && i.origin === 'engine')
      .map((i) => i.line);
    const want = expected('library big', true);
    expect(lines.length).toBe(want.length);
    lines.forEach((l, n) =>
      expect(l === want[n], `line ${n + 1} differs (${l.length} vs ${want[n].length} chars): ${l.slice(0, 120)}`).toBe(true),
    );
    const assistant = items.filter(isEngineItem).find((i) => i.message.type === 'assistant');
    expect(jsonAt(assistant?.message, 'message', 'content', 0, 'text')).toBe('café / library big');
  }, 90_000);

  it('pipe mode (tether chat --json): stdout carries each engine line exactly', async () => {
    const url = transport === 'ws' ? stack.wsUrl : stack.grpcUrl;
    const r = await runTether(['chat', '--agent', 'test-agent', '--json'], {
      env: { TETHER_GATEWAY: url, TETHER_TOKEN: stack.token },
      input: userLine('pipe big') + '\n',
      timeoutMs: 60_000,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(engineLines(r.stdout)).toEqual(expected('pipe big', true));
  }, 90_000);

  it('the SDK drop-in (tether-claude): stdout carries each engine line exactly', async () => {
    const url = transport === 'ws' ? stack.wsUrl : stack.grpcUrl;
    const r = await dropIn({ TETHER_GATEWAY: url, TETHER_TOKEN: stack.token, TETHER_AGENT: 'test-agent' }, 'drop-in big');
    expect(r.code, r.stderr).toBe(0);
    expect(engineLines(r.stdout)).toEqual(expected('drop-in big', true));
  }, 90_000);
});
