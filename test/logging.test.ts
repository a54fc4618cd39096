import { describe, expect, it } from 'vitest';
import { prettyLine } from '../core/log-pretty.js';
import { BoundLog, createLogger } from '../core/logging.js';
import { startRig } from './support/engines.js';
import { readTurn } from './support/turns.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** A logger writing JSON lines into memory. */
function memoryLogger(level = 'info') {
  const lines: string[] = [];
  const logger = createLogger({ name: 'test', level, destination: { write: (s: string) => void lines.push(s) } });
  return { logger, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>), text: () => lines.join('') };
}

describe('logs', () => {
  const cleanups = cleanupsPerTest();

  it('carry lifecycle at info with sessionId, agent, principal and transport, and never payloads or tokens', async () => {
    const mem = memoryLogger('info');
    const rig = cleanups.own(await startRig('demo', undefined, { logger: mem.logger }));
    const client = await rig.stack.client();
    const session = await client.createSession({ agent: 'test-agent' });
    const prompt = 'a very private prompt 7f3a';
    await session.sendUserMessage(prompt);
    await readTurn(session, () => undefined);

    const records = mem.records();
    const agentUp = records.find((r) => r.msg === 'peer connected' && r.role === 'agent');
    expect(agentUp).toMatchObject({ level: 30, agent: 'test-agent', principal: 'test-agent', transport: 'ws' });
    expect(records.find((r) => r.msg === 'peer connected' && r.role === 'client')).toMatchObject({
      principal: 'test-user',
      transport: 'ws',
    });
    expect(records.find((r) => r.msg === 'session started')).toMatchObject({
      level: 30,
      sessionId: session.id,
      agent: 'test-agent',
      owner: 'test-user',
    });
    expect(records.find((r) => r.msg === 'gateway ready')).toMatchObject({ ready: true });
    expect(mem.text()).not.toContain('7f3a');
    expect(mem.text()).not.toContain(rig.stack.token!);
  });

  it('a BoundLog writes what a child would, through the root, at the levels the root has on', () => {
    const mem = memoryLogger('info');
    const bindings = { transport: 'grpc', remote: '127.0.0.1:5', principal: 'alice' };
    const bound = new BoundLog(mem.logger, bindings);
    bound.info({ role: 'client' }, 'peer connected');
    bound.debug({ method: 'x' }, 'not at info');
    bound.warn({ token: 'eyJ.secret' }, 'careful');
    bound.logger.error({ n: 1 }, 'from the child');
    const strip = ({ time: _t, pid: _p, hostname: _h, ...r }: Record<string, unknown>) => r;
    expect(mem.records().map(strip)).toEqual([
      { level: 30, name: 'test', ...bindings, role: 'client', msg: 'peer connected' },
      { level: 40, name: 'test', ...bindings, token: '[redacted]', msg: 'careful' },
      { level: 50, name: 'test', ...bindings, n: 1, msg: 'from the child' },
    ]);
    expect(bound.logger).toBe(bound.logger); // one child, made once
  });

  it('redact secrets that reach a log call', () => {
    const mem = memoryLogger();
    mem.logger.info({ token: 'eyJ.secret', headers: { authorization: 'Bearer eyJ.secret' } }, 'oops');
    expect(mem.text()).not.toContain('eyJ.secret');
    expect(mem.records()[0]).toMatchObject({ token: '[redacted]', headers: { authorization: '[redacted]' } });
  });

  it('print pretty lines for people', () => {
    const line = JSON.stringify({
      level: 40,
      time: Date.UTC(2026, 0, 2, 3, 4, 5, 6),
      pid: 1,
      name: 'gateway',
      msg: 'peer stopped answering',
      agent: 'build-1',
      reason: 'no pong in time',
      n: 3,
    });
    expect(prettyLine(line, false)).toBe('03:04:05.006 WARN  gateway: peer stopped answering agent=build-1 reason="no pong in time" n=3\n');
    expect(prettyLine(line, true)).toContain('\x1b[33mWARN \x1b[0m');
    expect(prettyLine('not json', false)).toBe('not json\n');
  });
});
