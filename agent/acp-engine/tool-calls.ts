import type * as acp from '@agentclientprotocol/sdk';

/**
 * An ACP tool call as the engine stream names it: a Claude Code tool name by the call's kind
 * (so the gateway's rules in their Claude Code forms judge it: docs/policy.md) and an input
 * that carries the path or command those rules read, beside the ACP call's own raw input.
 */
export interface NamedToolCall {
  name: string;
  input: Record<string, unknown>;
}

/** Tool names by ACP kind: the rule forms that apply (Edit(path), Read(path), Bash(cmd), WebFetch(domain:h)). */
const TOOL_BY_KIND: Record<acp.ToolKind, string> = {
  edit: 'Edit',
  delete: 'Edit',
  move: 'Edit',
  read: 'Read',
  search: 'Grep',
  execute: 'Bash',
  fetch: 'WebFetch',
  think: 'Think',
  switch_mode: 'ExitPlanMode',
  other: 'Other',
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const firstString = (o: Record<string, unknown>, keys: string[]): string | undefined =>
  keys.map((k) => o[k]).find((v): v is string => typeof v === 'string' && v !== '');

/** Names one tool call (its latest known state: kind, title, locations, raw input). */
export function namedToolCall(call: Partial<acp.ToolCall>): NamedToolCall {
  const raw = isObject(call.rawInput) ? call.rawInput : {};
  const kind = call.kind ?? 'other';
  const input: Record<string, unknown> = { ...raw, acp_kind: kind, title: call.title ?? '' };
  const path = call.locations?.[0]?.path ?? firstString(raw, ['file_path', 'filePath', 'path', 'abs_path']);
  if (path !== undefined) input.file_path = path;
  if (call.locations?.length) input.locations = call.locations;
  if (kind === 'execute') {
    const cmd = raw.command;
    input.command = Array.isArray(cmd) ? cmd.join(' ') : typeof cmd === 'string' ? cmd : (call.title ?? '');
  }
  if (kind === 'fetch') {
    const url = firstString(raw, ['url', 'uri']);
    if (url !== undefined) input.url = url;
  }
  return { name: TOOL_BY_KIND[kind] ?? 'Other', input };
}

/** The text of a finished tool call, for its tool_result: its content blocks, else its raw output. */
export function toolResultText(call: Partial<acp.ToolCall>): string {
  const parts: string[] = [];
  for (const c of call.content ?? []) {
    if (c.type === 'content' && c.content.type === 'text') parts.push(c.content.text);
    else if (c.type === 'diff') parts.push(`${c.oldText === null || c.oldText === undefined ? 'Created' : 'Edited'} ${c.path}`);
    else if (c.type === 'terminal') parts.push(`(terminal ${c.terminalId})`);
  }
  if (parts.length > 0) return parts.join('\n');
  const out = call.rawOutput;
  if (out === undefined || out === null) return '';
  return typeof out === 'string' ? out : JSON.stringify(out);
}

/** A plan as the TodoWrite input clients already show. */
export function planTodos(plan: acp.Plan): Record<string, unknown> {
  return { todos: plan.entries.map((e) => ({ content: e.content, status: e.status, activeForm: e.content })) };
}
