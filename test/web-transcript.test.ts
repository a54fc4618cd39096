import { describe, expect, it } from 'vitest';
import { readFrame, readReply } from '../client/web/src/frames.js';
import { Transcript } from '../client/web/src/transcript.js';

/** The page's reading of the stream, without a browser: frames.ts and transcript.ts are pure. */
describe('web page: frames and transcript', () => {
  it('reads an engine frame carried as an escaped line or as a JSON value, and gateway events', () => {
    const msg = { type: 'assistant', message: { content: [{ type: 'text', text: 'hi' }] } };
    expect(readFrame({ session_id: 's', seq: 3, origin: 'engine', line: JSON.stringify(msg) })).toEqual({
      kind: 'engine',
      seq: 3,
      origin: 'engine',
      message: msg,
    });
    expect(readFrame({ session_id: 's', seq: 3, origin: 'engine', message: msg })).toEqual({
      kind: 'engine',
      seq: 3,
      origin: 'engine',
      message: msg,
    });
    expect(readFrame({ session_id: 's', seq: 4, origin: 'engine', line: 'not json' })).toBeUndefined();
    expect(readFrame({ session_id: 's', seq: 4, origin: 'engine', line: '[1]' })).toBeUndefined();
    const event = { type: 'tether' as const, subtype: 'state' as const, state: 'idle' as const, at: 'now' };
    expect(readFrame({ session_id: 's', seq: 5, origin: 'gateway', event })).toEqual({ kind: 'event', seq: 5, event });
    expect(readReply({ line: '{"type":"control_response"}' })).toEqual({ type: 'control_response' });
  });

  it('streams text, then replaces it with the final block; folds tool results onto their call', () => {
    const t = new Transcript();
    const engine = (message: Record<string, unknown>) => t.apply({ kind: 'engine', seq: 1, origin: 'engine', message });
    engine({ type: 'stream_event', event: { type: 'content_block_start', content_block: { type: 'text' } } });
    engine({ type: 'stream_event', event: { type: 'content_block_delta', delta: { type: 'text_delta', text: 'Hel' } } });
    expect(t.entries).toMatchObject([{ kind: 'text', text: 'Hel', streaming: true }]);
    engine({ type: 'assistant', message: { content: [{ type: 'text', text: 'Hello.' }] } });
    engine({ type: 'assistant', message: { content: [{ type: 'tool_use', id: 'tu1', name: 'Bash', input: { command: 'ls' } }] } });
    engine({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 'tu1', content: 'a\nb', is_error: false }] } });
    expect(t.entries).toMatchObject([
      { kind: 'text', text: 'Hello.', streaming: false },
      { kind: 'tool', name: 'Bash', result: { content: 'a\nb', isError: false } },
    ]);
  });

  it('keeps who decided a prompt, whichever of the decision and the withdrawal arrives first', () => {
    for (const order of [
      ['cancel', 'decided'],
      ['decided', 'cancel'],
    ]) {
      const t = new Transcript();
      t.apply({
        kind: 'engine',
        seq: 1,
        origin: 'engine',
        message: { type: 'control_request', request_id: 'r1', request: { subtype: 'can_use_tool', tool_name: 'Bash', input: {} } },
      });
      expect([...t.pending.keys()]).toEqual(['r1']);
      for (const step of order) {
        if (step === 'cancel')
          t.apply({ kind: 'engine', seq: 2, origin: 'gateway', message: { type: 'control_cancel_request', request_id: 'r1' } });
        else
          t.apply({
            kind: 'event',
            seq: 3,
            event: { type: 'tether', subtype: 'prompt_decided', request_id: 'r1', decided_by: 'bob', behavior: 'allow', at: 'now' },
          });
      }
      expect(t.pending.size).toBe(0);
      expect(t.entries).toMatchObject([{ kind: 'permission', prompt: { status: 'decided', decidedBy: 'bob', behavior: 'allow' } }]);
    }
  });

  it('reads one person coming and going in a row as one line', () => {
    const t = new Transcript();
    const presence = (principal: string, action: 'attached' | 'detached') =>
      t.apply({
        kind: 'event',
        seq: 1,
        event: { type: 'tether', subtype: 'presence', action, principal, client_id: 'c', role: 'viewer', at: 'now' },
      });
    presence('alice', 'attached');
    presence('alice', 'detached');
    presence('alice', 'attached');
    presence('bob', 'attached');
    expect(t.entries.map((e) => (e.kind === 'note' ? e.text : e.kind))).toEqual(['alice attached (viewer)', 'bob attached (viewer)']);
  });

  it('says in words when the model API is retried and when the conversation is compacted', () => {
    const t = new Transcript();
    const engine = (message: Record<string, unknown>) => t.apply({ kind: 'engine', seq: 1, origin: 'engine', message });
    engine({
      type: 'system',
      subtype: 'api_retry',
      attempt: 2,
      max_retries: 10,
      retry_delay_ms: 1200,
      error_status: 529,
      error: 'overloaded',
    });
    engine({ type: 'system', subtype: 'compact_boundary', compact_metadata: { trigger: 'auto', pre_tokens: 154_000 } });
    expect(t.entries.map((e) => (e.kind === 'note' ? e.text : e.kind))).toEqual([
      "The model's API failed (HTTP 529); the engine tries again in 1 s (attempt 2 of 10).",
      "The conversation was compacted to fit the model's context (it was 154k tokens); earlier details are summarised.",
    ]);
  });
});
