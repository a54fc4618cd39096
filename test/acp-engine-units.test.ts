import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answerOption, policyDecision, refusedInitialize, sessionRules } from '../agent/acp-engine/control.js';
import { splitCommandLine } from '../agent/acp-engine/presets.js';
import { StreamWriter } from '../agent/acp-engine/stream-writer.js';
import { namedToolCall } from '../agent/acp-engine/tool-calls.js';
import type { EngineState, Frame } from '../agent/demo-engine/frames.js';
import { engineCommandLine, resolveEngines } from '../agent/engine-command.js';
import { POLICY_CALLBACK_ID } from '../core/policy/hook.js';
import { cleanupsPerTest } from './support/cleanups.js';

/** The ACP engine's pure parts: engine choice, naming tool calls, answers, refusals and the update → line mapping. */
describe('ACP engine units', () => {
  const cleanups = cleanupsPerTest();

  it('resolves --engine lists: presets found on PATH, acp from --engine-command, the first is the default, demo always offered', () => {
    const dir = cleanups.tempDir('tether-acp-path-').path;
    for (const bin of ['opencode', 'claude-code-acp']) {
      writeFileSync(join(dir, bin), '#!/bin/sh\n');
      chmodSync(join(dir, bin), 0o755);
    }
    const saved = process.env.PATH;
    process.env.PATH = dir;
    try {
      const r = resolveEngines(['opencode', 'claude-acp']);
      expect(r.engines).toEqual(['opencode', 'claude-acp', 'demo']);
      expect(r.defaultEngine).toBe('opencode');
      expect(r.acpCommands?.opencode).toEqual([join(dir, 'opencode'), 'acp']);
      const line = engineCommandLine('claude-acp', r, {});
      expect(line.command).toBe(process.execPath);
      expect(line.args[0]).toMatch(/acp-engine\/main\.js$/);
      expect(JSON.parse(line.args[1]!)).toEqual([join(dir, 'claude-code-acp')]);
      expect(resolveEngines(['acp'], `${join(dir, 'opencode')} acp --port 0`).acpCommands?.acp).toEqual([
        join(dir, 'opencode'),
        'acp',
        '--port',
        '0',
      ]);
      expect(() => resolveEngines(['gemini'])).toThrow('engine "gemini" needs "gemini" on PATH');
      expect(() => resolveEngines(['acp'])).toThrow('engine "acp" needs the agent\'s command line');
      expect(() => engineCommandLine('codex', r, {})).toThrow('this agent has no codex engine');
    } finally {
      process.env.PATH = saved;
    }
    expect(splitCommandLine(`"/opt/my agent/bin" --flag 'a b'`)).toEqual(['/opt/my agent/bin', '--flag', 'a b']);
    expect(() => splitCommandLine('  ')).toThrow('engine command is empty');
    expect(() => splitCommandLine('a "b')).toThrow('unclosed');
  });

  it('names a tool call by its kind, with the path or command the policy reads', () => {
    expect(namedToolCall({ kind: 'edit', title: 'Write a.txt', locations: [{ path: '/w/a.txt' }], rawInput: { content: 'x' } })).toEqual({
      name: 'Edit',
      input: { content: 'x', acp_kind: 'edit', title: 'Write a.txt', file_path: '/w/a.txt', locations: [{ path: '/w/a.txt' }] },
    });
    expect(namedToolCall({ kind: 'execute', title: 'ls', rawInput: { command: ['ls', '-la'] } }).input.command).toBe('ls -la');
    expect(namedToolCall({ kind: 'read', rawInput: { filePath: '/w/b' } })).toMatchObject({ name: 'Read', input: { file_path: '/w/b' } });
    expect(namedToolCall({ kind: 'fetch', rawInput: { url: 'https://x.example/' } })).toMatchObject({
      name: 'WebFetch',
      input: { url: 'https://x.example/' },
    });
    expect(namedToolCall({}).name).toBe('Other');
  });

  it('answers with allow once or reject once (never the engine-wide always), cancelled when neither is offered', () => {
    const options = [
      { optionId: 'aa', name: 'Always', kind: 'allow_always' as const },
      { optionId: 'a1', name: 'Allow', kind: 'allow_once' as const },
      { optionId: 'r1', name: 'Reject', kind: 'reject_once' as const },
    ];
    expect(answerOption(options, true)).toEqual({ outcome: { outcome: 'selected', optionId: 'a1' } });
    expect(answerOption(options, false)).toEqual({ outcome: { outcome: 'selected', optionId: 'r1' } });
    expect(answerOption([options[0]!], false)).toEqual({ outcome: { outcome: 'cancelled' } });
    expect(sessionRules({ name: 'Edit', input: { file_path: '/w/a.txt' } })).toEqual([
      { type: 'addRules', rules: [{ toolName: 'Edit', ruleContent: '//w/a.txt' }], behavior: 'allow', destination: 'session' },
    ]);
  });

  it('refuses what only Claude Code takes in initialize, keeps the policy hook; a failed policy answer denies', () => {
    const policyHook = { PreToolUse: [{ hookCallbackIds: [POLICY_CALLBACK_ID] }] };
    expect(refusedInitialize({ subtype: 'initialize', hooks: null })).toBeUndefined();
    expect(refusedInitialize({ subtype: 'initialize', hooks: policyHook })).toBeUndefined();
    expect(refusedInitialize({ subtype: 'initialize', hooks: { PostToolUse: [{ hookCallbackIds: ['mine'] }] } })).toContain(
      'runs no SDK hooks (PostToolUse)',
    );
    expect(refusedInitialize({ subtype: 'initialize', hooks: null, systemPrompt: 'x', agents: {} })).toContain(
      'cannot take systemPrompt, agents',
    );
    expect(policyDecision({ subtype: 'error', error: 'boom' })).toMatchObject({ decision: 'deny' });
    expect(policyDecision({ subtype: 'success', response: {} })).toEqual({ decision: 'none' });
    expect(
      policyDecision({
        subtype: 'success',
        response: { hookSpecificOutput: { permissionDecision: 'deny', permissionDecisionReason: 'rule' } },
      }),
    ).toEqual({
      decision: 'deny',
      reason: 'rule',
    });
  });

  it('writes updates as engine lines: one text message per run of chunks, a tool call once its input is known, its result, a plan as TodoWrite', () => {
    const state: EngineState = {
      sessionId: 's1',
      model: 'm',
      permissionMode: 'default',
      cwd: '/w',
      partial: false,
      sessionStateFrames: false,
      promptTool: true,
      bypassLaunched: false,
      allowedTools: [],
      disallowedTools: [],
    };
    const out: Frame[] = [];
    const w = new StreamWriter(state, (f) => out.push(f));
    w.update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hel' } });
    w.update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'lo.' } });
    w.update({ sessionUpdate: 'tool_call', toolCallId: 't1', title: 'Write', kind: 'edit', status: 'pending' });
    w.update({ sessionUpdate: 'tool_call_update', toolCallId: 't1', locations: [{ path: '/w/a' }], status: 'in_progress' });
    w.update({
      sessionUpdate: 'tool_call_update',
      toolCallId: 't1',
      status: 'failed',
      content: [{ type: 'content', content: { type: 'text', text: 'no' } }],
    });
    w.update({ sessionUpdate: 'plan', entries: [{ content: 'step', status: 'pending', priority: 'high' }] });
    w.end({ stopReason: 'end_turn', durationMs: 1, resultIndex: 0, queued: 0, userMessageUuids: [] });
    const blocks = out.map((f) => (f.message as { content?: Array<Record<string, unknown>> } | undefined)?.content?.[0]);
    expect(out.map((f) => f.type)).toEqual(['assistant', 'assistant', 'user', 'assistant', 'user', 'result']);
    expect(blocks[0]).toEqual({ type: 'text', text: 'Hello.' });
    expect(blocks[1]).toMatchObject({ type: 'tool_use', id: 't1', name: 'Edit', input: { file_path: '/w/a', acp_kind: 'edit' } });
    expect(blocks[2]).toMatchObject({ type: 'tool_result', tool_use_id: 't1', content: 'no', is_error: true });
    expect(blocks[3]).toMatchObject({ type: 'tool_use', name: 'TodoWrite', input: { todos: [{ content: 'step', status: 'pending' }] } });
    expect(out.at(-1)).toMatchObject({ type: 'result', is_error: false, result: 'Hello.', session_id: 's1' });
  });
});
