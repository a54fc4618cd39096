import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { encodeEventFrame, encodeLineFrame, frameBuffer } from '../core/wire/session-frame.js';
import { tetherEvent } from '../core/protocol/events.js';
import { translateFrame, type DialectEvent } from '../gateway/dialects/jsonrpc/translate.js';

/**
 * The dialect's translator over the real CLI transcripts (test/fixtures/engine): each
 * engine line is framed exactly as the gateway frames it, then translated.
 */
const FIXTURES = process.env.TETHER_ENGINE_FIXTURES ?? join(__dirname, 'fixtures', 'engine');

type Line = Record<string, any>;

function outLines(name: string): Line[] {
  const file = readdirSync(FIXTURES).find((f) => f.startsWith(`${name}`) && f.endsWith('.ndjson'));
  if (!file) throw new Error(`no fixture ${name}`);
  return readFileSync(join(FIXTURES, file), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as { dir: string; frame?: Line })
    .filter((r) => r.dir === 'out' && r.frame)
    .map((r) => r.frame!);
}

function events(lines: Line[]): DialectEvent[] {
  return lines.flatMap(
    (line, i) => translateFrame(frameBuffer(encodeLineFrame('s1', i + 1, 'engine', Buffer.from(JSON.stringify(line))))).events,
  );
}

const of = <K extends DialectEvent['kind']>(evs: DialectEvent[], kind: K) =>
  evs.filter((e): e is Extract<DialectEvent, { kind: K }> => e.kind === kind);

const ALL = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.ndjson'))
  .map((f) => f.replace(/\.ndjson$/, ''));

describe('JSON-RPC dialect translator over the real CLI transcripts', () => {
  it.each(ALL)('%s: one turn_complete per result, one permission per can_use_tool, one withdrawal per cancel', (name) => {
    const lines = outLines(name);
    const evs = events(lines);
    expect(of(evs, 'turn_complete')).toHaveLength(lines.filter((l) => l.type === 'result').length);
    expect(of(evs, 'permission')).toHaveLength(
      lines.filter((l) => l.type === 'control_request' && l.request?.subtype === 'can_use_tool').length,
    );
    expect(of(evs, 'withdrawn')).toHaveLength(lines.filter((l) => l.type === 'control_cancel_request').length);
    for (const r of of(evs, 'tool_result')) expect(typeof r.content).toBe('string');
  });

  it('02 partial messages: tokens spell the text, under the message id of message_start; the tool call follows', () => {
    const lines = outLines('02_partial_messages');
    const evs = events(lines);
    const text = lines
      .filter((l) => l.type === 'assistant')
      .flatMap((l) => l.message.content.filter((b: Line) => b.type === 'text').map((b: Line) => b.text));
    expect(
      of(evs, 'token')
        .map((t) => t.token)
        .join(''),
    ).toBe(text.join(''));
    expect(of(evs, 'token').length).toBeGreaterThan(1);
    const ids = new Set(lines.filter((l) => l.type === 'assistant').map((l) => l.message.id));
    for (const s of of(evs, 'message_start')) expect(ids.has(s.message_id)).toBe(true);
    for (const t of of(evs, 'token')) expect(ids.has(t.message_id!)).toBe(true); // each delta names its message
    const [tool] = of(evs, 'tool_use_start');
    expect(tool).toMatchObject({ name: 'Bash', tool_use_id: 'toolu_p1', input: { command: 'ls -la > listing.txt' } });
    expect(evs.findIndex((e) => e.kind === 'tool_use_start')).toBeGreaterThan(evs.findIndex((e) => e.kind === 'token'));
    expect(of(evs, 'permission')[0]).toMatchObject({ tool: 'Bash', tool_use_id: 'toolu_p1', input: { command: 'ls -la > listing.txt' } });
  });

  it('10 allow / 12 deny: the tool result and its error flag; both turns completed', () => {
    const allow = events(outLines('10_permission_allow'));
    expect(of(allow, 'tool_result')[0]).toMatchObject({ tool_use_id: 'toolu_01', is_error: false });
    expect(of(allow, 'turn_complete')[0]).toMatchObject({ status: 'completed', stop_reason: 'end_turn' });
    const deny = events(outLines('12_permission_deny'));
    expect(of(deny, 'tool_result')[0].is_error).toBe(true);
    expect(of(deny, 'turn_complete')[0].status).toBe('completed');
  });

  it('usage comes from the result', () => {
    const lines = outLines('01_basic_text_turn');
    const result = lines.find((l) => l.type === 'result')!;
    expect(of(events(lines), 'turn_complete')[0].usage).toEqual({
      input_tokens: result.usage.input_tokens,
      output_tokens: result.usage.output_tokens,
    });
  });

  it.each([
    ['13_permission_deny_interrupt', 'interrupted'],
    ['15_permission_pending_then_interrupt', 'interrupted'],
    ['30_interrupt_streaming', 'interrupted'],
    ['31_interrupt_during_tool', 'interrupted'],
    ['90_api_error_400', 'error'],
    ['91_api_error_401', 'error'],
  ])('%s: the turn ends %s (judged on is_error, not subtype)', (name, status) => {
    const lines = outLines(name);
    expect(of(events(lines), 'turn_complete').map((t) => t.status)).toContain(status);
    if (status === 'error') expect(lines.find((l) => l.type === 'result')!.subtype).toBe('success');
  });

  it('15: the pending prompt is withdrawn by the engine', () => {
    const evs = events(outLines('15_permission_pending_then_interrupt'));
    expect(of(evs, 'withdrawn')[0].request_id).toBe(of(evs, 'permission')[0].request_id);
  });

  it('20: AskUserQuestion arrives as a permission for that tool with its questions and options', () => {
    const [ask] = of(events(outLines('20_ask_user_question')), 'permission');
    expect(ask.tool).toBe('AskUserQuestion');
    expect((ask.input.questions as Line[])[0].options.map((o: Line) => o.label)).toEqual(['Postgres', 'SQLite']);
  });

  it('84: a prompt folded into the running turn is answered by the same result', () => {
    const [done] = of(events(outLines('84_message_folded_mid_turn')), 'turn_complete');
    expect(done.user_message_uuids).toEqual(['aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb']);
  });

  it('93: a long tool reports progress (task start, heartbeat, notification); system/init gives the engine', () => {
    const evs = events(outLines('93_long_tool_progress'));
    expect(of(evs, 'progress').map((p) => p.progress.kind)).toEqual(expect.arrayContaining(['task_started', 'tool', 'task_notification']));
    const [engine] = of(evs, 'engine');
    expect(engine.tools).toContain('Bash');
    expect(typeof engine.model).toBe('string');
  });

  it('parses each frame once however many clients read it, and reads gateway events', () => {
    const frame = frameBuffer(
      encodeLineFrame(
        's1',
        1,
        'engine',
        Buffer.from('{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}}'),
      ),
    );
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const first = translateFrame(frame);
      const again = translateFrame(frame);
      expect(again).toBe(first);
      expect(parse).toHaveBeenCalledTimes(1);
    } finally {
      parse.mockRestore();
    }
    expect(translateFrame(frame)).toMatchObject({ session_id: 's1', seq: 1, events: [{ kind: 'token', token: 'Hi' }] });
    const presence = encodeEventFrame(
      's1',
      2,
      tetherEvent({ subtype: 'presence', action: 'attached', principal: 'ann', client_id: 'c-1', role: 'viewer' }),
    );
    expect(translateFrame(presence).events).toEqual([
      { kind: 'presence', action: 'attached', principal: 'ann', client_id: 'c-1', role: 'viewer' },
    ]);
    const exited = encodeEventFrame('s1', 3, tetherEvent({ subtype: 'exited', code: 0, signal: null, stderr_tail: '', reason: 'stopped' }));
    expect(translateFrame(exited).events).toEqual([{ kind: 'state', state: 'ended', reason: 'stopped' }]);
    // A withdrawal the gateway wrote is not a new prompt; a control_request it wrote never raises one.
    expect(
      translateFrame(
        frameBuffer(
          encodeLineFrame(
            's1',
            4,
            'gateway',
            Buffer.from('{"type":"control_request","request_id":"x","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{}}}'),
          ),
        ),
      ).events,
    ).toEqual([]);
  });
});
