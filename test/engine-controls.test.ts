import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { allowControlProblem, checkControl, controlClassOf, ENGINE_CONTROLS, setCwdTarget } from '../core/engine-controls.js';
import { thrownBy } from './support/thrown.js';

/** The control plane's table (core/engine-controls.ts), case by case; the real CLI's side: control-plane-trust.test.ts. */
describe('engine controls', () => {
  const cls = (request: Record<string, unknown>) => controlClassOf(request);

  it('lists every host→CLI subtype of docs/engine-protocol.md section 5.2, and nothing else', () => {
    const documented =
      'initialize interrupt set_model set_permission_mode get_context_usage mcp_status get_binary_version get_session_cost list_models get_settings ' +
      'set_max_thinking_tokens rename_session apply_flag_settings rewind_files mcp_set_servers mcp_reconnect mcp_toggle mcp_call mcp_message ' +
      'mcp_read_resource stop_task background_tasks get_task_output cancel_async_message get_usage get_hooks_listing list_permission_rules ' +
      'update_settings reload_plugins reload_skills reload_output_styles read_file seed_read_state set_color set_has_subscribers file_suggestions register_repo_root ' +
      'get_status export_conversation get_plan get_memory_dialog get_skills_dialog get_sandbox_dialog get_chrome_dialog get_chrome_browsers select_chrome_browser ' +
      'set_chrome_browser_hints set_prompt_suggestions_paused prompt_draft_activity message_rated generate_session_title side_question ' +
      'set_mcp_permission_mode_override channel_enable mcp_authenticate mcp_oauth_callback_url mcp_clear_auth claude_authenticate claude_oauth_callback ' +
      'claude_oauth_wait_for_completion submit_feedback submit_survey_feedback ultrareview_launch remote_control claim_session set_cwd';
    expect([...ENGINE_CONTROLS].sort()).toEqual(documented.split(' ').sort());
    expect(cls({ subtype: 'no_such_subtype' })).toBeUndefined();
    expect(cls({ subtype: 'toString' })).toBeUndefined();
    expect(cls({})).toBeUndefined();
  });

  it('knows every control request the installed Agent SDK sends (sdk.mjs), so none is refused as unknown', () => {
    const sdk = readFileSync(createRequire(import.meta.url).resolve('@anthropic-ai/claude-agent-sdk'), 'utf8');
    const sent = new Set([...sdk.matchAll(/this\.request\(\{subtype:"([a-z_]+)"/g)].map((m) => m[1]));
    expect(sent.size).toBeGreaterThan(50);
    expect([...sent].filter((s) => !ENGINE_CONTROLS.includes(s))).toEqual([]);
  });

  it('set_cwd takes an absolute folder only, and the SDK-only subtypes are classed by what the CLI does with them', () => {
    expect(setCwdTarget({ subtype: 'set_cwd', path: '/srv/x' })).toBe('/srv/x');
    expect(setCwdTarget({ subtype: 'interrupt' })).toBeUndefined();
    for (const path of ['x', '', 1, undefined, '/a\0b'])
      expect(thrownBy(() => setCwdTarget({ subtype: 'set_cwd', path }))?.code).toBe('INVALID_ARGUMENT');
    expect(cls({ subtype: 'set_cwd', path: '/' })).toBe('widens-files');
    expect(cls({ subtype: 'remote_control', enabled: false })).toBe('safe');
    expect(cls({ subtype: 'remote_control', enabled: true })).toBe('reaches-network');
    expect(cls({ subtype: 'claude_authenticate' })).toBe('writes-settings');
    expect(cls({ subtype: 'set_mcp_permission_mode_override', serverName: 'x', mode: 'auto' })).toBe('safe');
    expect(allowControlProblem('get_status')).toContain('always allowed');
    expect(allowControlProblem('set_cwd')).toBeUndefined();
  });

  it('classes by value where the value decides', () => {
    expect(cls({ subtype: 'mcp_set_servers', servers: { a: { type: 'sdk', name: 'a' } } })).toBe('safe');
    expect(cls({ subtype: 'mcp_set_servers', servers: {} })).toBe('safe');
    expect(cls({ subtype: 'mcp_set_servers', servers: { a: { command: 'sh' } } })).toBe('runs-programs');
    expect(cls({ subtype: 'mcp_set_servers', servers: { a: { type: 'http', url: 'http://169.254.169.254/' } } })).toBe('runs-programs');
    expect(cls({ subtype: 'apply_flag_settings', settings: { model: 'x', permissions: { deny: ['Bash'], defaultMode: 'plan' } } })).toBe(
      'safe',
    );
    expect(cls({ subtype: 'apply_flag_settings', settings: { hooks: {} } })).toBe('runs-programs');
    expect(cls({ subtype: 'apply_flag_settings', settings: { env: { ANTHROPIC_BASE_URL: 'http://x' } } })).toBe('changes-endpoint');
    expect(cls({ subtype: 'apply_flag_settings', settings: { permissions: { allow: ['Bash'] } } })).toBe('widens-permissions');
    expect(cls({ subtype: 'apply_flag_settings', settings: { permissions: { defaultMode: 'bypassPermissions' } } })).toBe(
      'bypasses-permissions',
    );
    expect(cls({ subtype: 'apply_flag_settings', settings: { additionalDirectories: ['/'] } })).toBe('widens-files');
    expect(cls({ subtype: 'apply_flag_settings', settings: { somethingNew: true } })).toBe('loads-code');
    expect(cls({ subtype: 'apply_flag_settings', settings: '/etc/settings.json' })).toBe('loads-code');
    expect(cls({ subtype: 'update_settings', source: 'userSettings', settings: { model: 'x' } })).toBe('writes-settings');
    expect(cls({ subtype: 'mcp_toggle', serverName: 'a', enabled: false })).toBe('safe');
    expect(cls({ subtype: 'mcp_toggle', serverName: 'a', enabled: true })).toBe('runs-programs');
  });

  it('judges initialize by its fields: what the Agent SDK sends is safe (subagents as prompts and tools too); plugins, settings, command hooks, subagents that start servers or skip prompts are not', () => {
    const sdk = {
      subtype: 'initialize',
      hooks: { PreToolUse: [{ matcher: 'Bash', hookCallbackIds: ['hook_0'], timeout: 60 }] },
      sdkMcpServers: ['tools'],
      systemPrompt: ['x'],
      jsonSchema: undefined,
      title: 't',
    };
    expect(cls(sdk)).toBe('safe');
    expect(cls({ subtype: 'initialize', hooks: null })).toBe('safe');
    expect(cls({ ...sdk, hooks: { PreToolUse: [{ hooks: [{ type: 'command', command: 'id' }] }] } })).toBe('runs-programs');
    expect(cls({ ...sdk, mcpServers: { a: { command: 'sh' } } })).toBe('runs-programs');
    expect(cls({ ...sdk, agents: { a: { description: 'd', prompt: 'p', tools: ['Read'], model: 'sonnet', mcpServers: ['tools'] } } })).toBe(
      'safe',
    );
    expect(cls({ ...sdk, agents: { a: { description: 'd', prompt: 'p', mcpServers: [{ x: { command: 'sh' } }] } } })).toBe('runs-programs');
    expect(cls({ ...sdk, agents: { a: { description: 'd', prompt: 'p', permissionMode: 'bypassPermissions' } } })).toBe(
      'bypasses-permissions',
    );
    expect(cls({ ...sdk, agents: { a: { description: 'd', prompt: 'p', permissionMode: 'acceptEdits' } } })).toBe('widens-permissions');
    expect(cls({ ...sdk, agents: { a: { description: 'd', prompt: 'p', hooks: {} } } })).toBe('loads-code');
    expect(cls({ ...sdk, agents: '/etc/agents.json' })).toBe('loads-code');
    expect(cls({ ...sdk, plugins: [{ type: 'local', path: '/tmp/p' }] })).toBe('loads-code');
    expect(cls({ ...sdk, settings: { env: { X: '1' } } })).toBe('changes-endpoint');
    expect(cls({ ...sdk, futureField: 1 })).toBe('loads-code');
  });

  it("refuses in the flags' words, lets the owner allow a subtype, and keeps what is not safe to the session's owner", () => {
    const mcp = { subtype: 'mcp_set_servers', servers: { a: { command: 'sh' } } };
    const denied = thrownBy(() => checkControl(mcp, {}, 'buildbox'));
    expect(denied?.code).toBe('PERMISSION_DENIED');
    expect(denied?.message).toBe(
      'engine control "mcp_set_servers" is not allowed by agent "buildbox" (it makes the engine start a program); its owner can allow it with --allow-engine-control mcp_set_servers',
    );
    expect(thrownBy(() => checkControl(mcp, { allowControls: ['mcp_set_servers'] }, 'buildbox'))).toBeUndefined(); // the agent knows no roles
    expect(thrownBy(() => checkControl(mcp, { allowControls: ['mcp_set_servers'] }, 'buildbox', 'owner'))).toBeUndefined();
    expect(thrownBy(() => checkControl(mcp, { allowControls: ['mcp_set_servers'] }, 'buildbox', 'controller'))?.code).toBe(
      'PERMISSION_DENIED',
    );
    expect(thrownBy(() => checkControl({ subtype: 'interrupt' }, {}, 'buildbox', 'controller'))).toBeUndefined();
    expect(thrownBy(() => checkControl({ subtype: 'nope' }, {}, 'buildbox', 'owner'))?.code).toBe('INVALID_ARGUMENT');
  });

  it("cancel_async_message is the gateway's own: no client role may send it (session.withdraw_prompt checks who may), the agent passes it", () => {
    const cancel = { subtype: 'cancel_async_message', message_uuid: 'u1' };
    for (const role of ['owner', 'controller', 'viewer']) {
      const refused = thrownBy(() => checkControl(cancel, { allowControls: ['cancel_async_message'] }, 'buildbox', role));
      expect(refused?.code).toBe('PERMISSION_DENIED');
      expect(refused?.message).toContain('session.withdraw_prompt');
    }
    expect(thrownBy(() => checkControl(cancel, {}, 'buildbox'))).toBeUndefined(); // the agent knows no roles: the gateway's own request passes
  });

  it("checks an owner's --allow-engine-control entry", () => {
    expect(allowControlProblem('mcp_set_servers')).toBeUndefined();
    expect(allowControlProblem('update_settings')).toBeUndefined();
    expect(allowControlProblem('interrupt')).toContain('always allowed');
    expect(allowControlProblem('frobnicate')).toContain('not an engine control subtype');
  });
});
