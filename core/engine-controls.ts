import { TetherError } from './errors.js';
import { CLASS_WORDS, onlySdkServerMap, type FlagClass } from './engine-flags.js';

/**
 * The one description of the engine's control plane as clients may use it (Claude Code
 * 2.1.332, docs/engine-protocol.md section 5.2): every control request subtype a client may
 * send, the session role it needs and what it lets its sender do on the agent's machine, in
 * the classes of the engine's flags (core/engine-flags.ts). Control requests reach a running
 * engine that the agent started with checked flags, so a subtype that would do what a refused
 * flag does (start a program, load code or settings, change the engine's environment or
 * endpoint, reach files beyond the session's folder) is refused unless the agent's owner
 * allows it (`tether agent --allow-engine-control SUBTYPE`), in the same words. The gateway
 * checks this before anything is queued; the agent checks it again before the engine's stdin.
 * Any subtype not listed here is refused.
 */

/**
 * What a control request lets its sender do: a flag class, or one of the control plane's own:
 *  - `changes-endpoint`: sets the engine's environment (e.g. `ANTHROPIC_BASE_URL`, where its
 *    API key then goes);
 *  - `widens-permissions`: adds allow rules, so tools run without asking anyone;
 *  - `writes-settings`: writes a settings file of the agent's user, which every later session
 *    reads (its credentials too: a login or an MCP server's OAuth tokens);
 *  - `reaches-network`: sends the session (or opens it) to a service other than the model API
 *    (feedback, Anthropic's cloud review, claude.ai Remote Control).
 */
export type ControlClass =
  | Exclude<FlagClass, 'plumbing'>
  | 'changes-endpoint'
  | 'widens-permissions'
  | 'writes-settings'
  | 'reaches-network';

/**
 * The least session role that may send a subtype (viewers send no input at all); `gateway`:
 * no client may, the gateway sends it on a member's behalf after its own check.
 */
export type ControlRole = 'controller' | 'owner' | 'gateway';

/** One subtype: the role it needs when it is safe, and its class (or how its value decides). */
interface ControlEntry {
  role: ControlRole;
  class: ControlClass | ((request: Record<string, unknown>) => ControlClass);
}

const safe = (role: ControlRole = 'controller'): ControlEntry => ({ role, class: 'safe' });
const is = (cls: ControlClass): ControlEntry => ({ role: 'owner', class: cls });

/**
 * Every subtype a client may send. Not safe ones also need the session's owner: the owner of
 * the agent allows them for sessions, and a session's owner (who chose its flags) uses them.
 * The central policy still judges the safe ones it has rules for (gateway/policy/policy-gate.ts:
 * modes, models, mcp_call and read_file).
 */
const CONTROLS: Record<string, ControlEntry> = {
  initialize: { role: 'controller', class: initializeClass },
  interrupt: safe(),
  set_model: safe(),
  set_permission_mode: safe(), // the policy's ceiling judges it; the engine refuses bypassPermissions unless the owner let it launch so
  get_context_usage: safe(),
  mcp_status: safe(),
  get_binary_version: safe(),
  get_session_cost: safe(),
  list_models: safe(),
  get_settings: safe(),
  set_max_thinking_tokens: safe(),
  rename_session: safe('owner'), // the engine's title becomes the session's (gateway/session/session-title.ts): renaming is the owner's
  apply_flag_settings: { role: 'controller', class: (r) => settingsClass(r.settings) },
  update_settings: { role: 'owner', class: (r) => worst(settingsClass(r.settings), 'writes-settings') },
  rewind_files: safe(), // restores only files this session's own edits changed (file checkpointing)
  mcp_set_servers: { role: 'controller', class: (r) => (onlySdkServerMap(r.servers) || isEmptyMap(r.servers) ? 'safe' : 'runs-programs') },
  mcp_reconnect: safe(), // restarts a server the owner configured
  mcp_toggle: { role: 'controller', class: (r) => (r.enabled === false ? 'safe' : 'runs-programs') }, // enabling starts a server the owner left off
  mcp_call: safe(),
  mcp_message: safe(), // traffic to the client's own in-process SDK server
  mcp_read_resource: safe(),
  stop_task: safe(),
  background_tasks: safe(),
  get_task_output: safe(),
  cancel_async_message: { role: 'gateway', class: 'safe' }, // withdraws anyone's queued prompt: session.withdraw_prompt checks who may
  get_usage: safe(),
  get_hooks_listing: safe(),
  list_permission_rules: safe(),
  reload_plugins: is('loads-code'),
  reload_skills: is('loads-code'),
  reload_output_styles: is('loads-code'),
  read_file: safe(),
  seed_read_state: safe(),
  set_color: safe(),
  set_has_subscribers: safe(),
  file_suggestions: safe(),
  register_repo_root: is('widens-files'),
  // Known to the Agent SDK 0.3.332; each probed with the CLI 2.1.332 (docs/engine-protocol.md §5.2).
  get_status: safe(), // version, session id, cwd, the API key's source (its name) and base URL
  export_conversation: safe(), // the transcript as text in the answer; writes no file
  get_plan: safe(),
  get_memory_dialog: safe(), // lists CLAUDE.md and memory paths
  get_skills_dialog: safe(),
  get_sandbox_dialog: safe(),
  get_chrome_dialog: safe(),
  get_chrome_browsers: safe(),
  select_chrome_browser: is('runs-programs'), // drives a browser on a machine of the agent's user
  set_chrome_browser_hints: is('runs-programs'),
  set_prompt_suggestions_paused: safe(),
  prompt_draft_activity: safe(),
  message_rated: safe(),
  generate_session_title: safe('owner'), // one model call; persist renames the session as rename_session does (the owner's)
  side_question: safe(), // one model call without tools, answered beside the conversation
  set_mcp_permission_mode_override: safe(), // the CLI accepts only default, auto or null: tighten-only
  channel_enable: is('loads-code'), // an MCP server's pushed messages become the model's input
  mcp_authenticate: is('writes-settings'), // OAuth: opens a local listener, stores the server's tokens
  mcp_oauth_callback_url: is('writes-settings'),
  mcp_clear_auth: is('writes-settings'),
  claude_authenticate: is('writes-settings'), // logs the engine in: a listener on localhost, then the user's credentials file
  claude_oauth_callback: is('writes-settings'),
  claude_oauth_wait_for_completion: is('writes-settings'),
  submit_feedback: is('reaches-network'), // may attach the transcript
  submit_survey_feedback: is('reaches-network'),
  ultrareview_launch: is('reaches-network'), // a review of the repository in Anthropic's cloud
  remote_control: { role: 'controller', class: (r) => (r.enabled === false ? 'safe' : 'reaches-network') }, // claude.ai drives the engine past Tether
  claim_session: is('loads-code'), // a whole session's options, for a spare started with --await-claim (the agent never does)
  set_cwd: is('widens-files'), // moves the session (and the trust answer writes ~/.claude.json); when allowed, held to the roots (checkControlCwd)
};

/** Every subtype a client may send, for docs and the owner's allowances. */
export const ENGINE_CONTROLS: readonly string[] = Object.keys(CONTROLS);

/** The words of each class, in refusals (the flag classes' words plus the control plane's own). */
const WORDS: Record<Exclude<ControlClass, 'safe'>, string> = {
  ...CLASS_WORDS,
  'changes-endpoint': "it changes the engine's environment or the endpoint its API key goes to",
  'widens-permissions': 'it lets tools run without asking anyone',
  'writes-settings': "it writes the agent user's settings files, which every later session reads",
  'reaches-network': 'it sends the session to a service other than the model API, or lets one drive it',
};

/** Classes from least to most reach, to name the worst one a request has. */
const ORDER: readonly ControlClass[] = [
  'safe',
  'widens-files',
  'loads-code',
  'writes-settings',
  'reaches-network',
  'widens-permissions',
  'changes-endpoint',
  'runs-programs',
  'bypasses-permissions',
];

function worst(...classes: ControlClass[]): ControlClass {
  return classes.reduce((a, b) => (ORDER.indexOf(b) > ORDER.indexOf(a) ? b : a), 'safe');
}

const isEmptyMap = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;

/**
 * Settings keys by what they do (apply_flag_settings, update_settings, initialize.settings).
 * Keys not named here are not safe: an unknown setting may load or run anything.
 */
const SETTINGS_KEYS: Record<string, ControlClass> = {
  model: 'safe', // the policy's model list judges it
  effortLevel: 'safe',
  alwaysThinkingEnabled: 'safe',
  outputStyle: 'safe',
  language: 'safe',
  includeCoAuthoredBy: 'safe',
  spinnerTipsEnabled: 'safe',
  fastMode: 'safe',
  hooks: 'runs-programs',
  statusLine: 'runs-programs',
  fileSuggestion: 'runs-programs',
  apiKeyHelper: 'runs-programs',
  awsAuthRefresh: 'runs-programs',
  awsCredentialExport: 'runs-programs',
  otelHeadersHelper: 'runs-programs',
  mcpServers: 'runs-programs',
  enabledMcpjsonServers: 'runs-programs',
  enableAllProjectMcpServers: 'runs-programs',
  env: 'changes-endpoint',
  plugins: 'loads-code',
  enabledPlugins: 'loads-code',
  extraKnownMarketplaces: 'loads-code',
  disableAllHooks: 'loads-code', // drops the owner's own hooks
  additionalDirectories: 'widens-files',
};

/** Keys of `settings.permissions`: deny and ask only narrow; a mode is judged by the policy's ceiling. */
const PERMISSIONS_KEYS: Record<string, ControlClass> = {
  deny: 'safe',
  ask: 'safe',
  defaultMode: 'safe',
  allow: 'widens-permissions',
  additionalDirectories: 'widens-files',
};

function settingsClass(settings: unknown): ControlClass {
  if (settings === undefined || settings === null) return 'safe';
  if (typeof settings !== 'object' || Array.isArray(settings)) return 'loads-code'; // e.g. a path the CLI would read
  const classes = Object.entries(settings as Record<string, unknown>).map(([key, value]): ControlClass => {
    if (key !== 'permissions') return SETTINGS_KEYS[key] ?? 'loads-code';
    if (typeof value !== 'object' || value === null) return 'loads-code';
    return worst(
      ...Object.entries(value as Record<string, unknown>).map(([k, v]) =>
        k === 'defaultMode' && v === 'bypassPermissions' ? 'bypasses-permissions' : (PERMISSIONS_KEYS[k] ?? 'loads-code'),
      ),
    );
  });
  return worst(...classes);
}

/**
 * `initialize` fields by what they do. The Agent SDK's own (callback hooks, in-process SDK
 * servers, prompts, flags of the stream) are safe; agents, plugins, settings and MCP server
 * commands would do what `--agents`, `--plugin-dir`, `--settings` and `--mcp-config` do.
 */
const INITIALIZE_SAFE = new Set(
  (
    'subtype hooks sdkMcpServers sdkMcpServerConfigs sdkMcpServerManifests jsonSchema systemPrompt appendSystemPrompt planModeInstructions ' +
    'systemPromptSnapshot appendSubagentSystemPrompt toolAliases codeRunningMcpTools excludeDynamicSections title skills ' +
    'webSearchIsolationExemptMcpServers promptSuggestions agentProgressSummaries forwardSubagentText supportedDialogKinds ' +
    'perTaskStopAffordance rapidFollowupPreempt forwardNestedSubagentToolCalls offersBypassSwitchBack keepsBypassHeld disallowedTools'
  ).split(' '),
);

function initializeClass(r: Record<string, unknown>): ControlClass {
  const classes = Object.entries(r).map(([key, value]): ControlClass => {
    if (key === 'hooks' && value !== null && value !== undefined) return onlyCallbackHooks(value) ? 'safe' : 'runs-programs';
    if (value === undefined || value === null || INITIALIZE_SAFE.has(key)) return 'safe';
    if (key === 'settings') return settingsClass(value);
    if (key === 'mcpServers') return onlySdkServerMap(value) || isEmptyMap(value) ? 'safe' : 'runs-programs';
    if (key === 'agents') return agentsClass(value);
    return 'loads-code'; // plugins, managedSettings, workspaceTrust and anything unknown
  });
  return worst(...classes);
}

/** Subagent definition fields that only shape the subagent (its prompt, tools, model, limits). */
const AGENT_SAFE = new Set(
  (
    'description prompt tools disallowedTools model criticalSystemReminder_EXPERIMENTAL skills initialPrompt maxTurns autoCompactWindow ' +
    'background omitClaudeMd effort observer observerMessage'
  ).split(' '),
);

/**
 * Subagents defined in `initialize.agents` (what the Agent SDK sends for `options.agents`):
 * prompts and tool lists are safe (their tool calls ask and meet the policy like any other);
 * inline MCP server commands start programs, a permission mode other than default or plan
 * runs tools unasked, `memory` keeps files beyond the session, and any other field (or a
 * definition that is not an object, e.g. a file the CLI would read) is not safe.
 */
function agentsClass(agents: unknown): ControlClass {
  if (typeof agents !== 'object' || agents === null || Array.isArray(agents)) return 'loads-code';
  const fieldClass = ([key, value]: [string, unknown]): ControlClass => {
    if (value === undefined || AGENT_SAFE.has(key)) return 'safe';
    if (key === 'permissionMode')
      return value === 'default' || value === 'plan'
        ? 'safe'
        : value === 'bypassPermissions'
          ? 'bypasses-permissions'
          : 'widens-permissions';
    if (key === 'mcpServers')
      return Array.isArray(value) && value.every((spec) => typeof spec === 'string' || onlySdkServerMap(spec)) ? 'safe' : 'runs-programs';
    if (key === 'memory') return 'widens-files';
    return 'loads-code';
  };
  return worst(
    ...Object.values(agents).map((d) =>
      typeof d === 'object' && d !== null && !Array.isArray(d) ? worst(...Object.entries(d).map(fieldClass)) : 'loads-code',
    ),
  );
}

/**
 * Whether an initialize `hooks` map holds callback matchers only (`hookCallbackIds`, answered
 * by the client over the session), not settings-style `hooks: [{type: "command", …}]` lists.
 */
function onlyCallbackHooks(hooks: unknown): boolean {
  if (typeof hooks !== 'object' || hooks === null || Array.isArray(hooks)) return false;
  return Object.values(hooks).every(
    (matchers) =>
      Array.isArray(matchers) && matchers.every((m) => typeof m === 'object' && m !== null && !('hooks' in m) && !('command' in m)),
  );
}

/** What one control request lets its sender do, or undefined for a subtype Tether does not know. */
export function controlClassOf(request: Record<string, unknown>): ControlClass | undefined {
  const entry = typeof request.subtype === 'string' && Object.hasOwn(CONTROLS, request.subtype) ? CONTROLS[request.subtype] : undefined;
  if (!entry) return undefined;
  return typeof entry.class === 'function' ? entry.class(request) : entry.class;
}

/**
 * The folder a `set_cwd` moves the session to, undefined for any other subtype. Both sides
 * hold it to the folders a create's `cwd` may name (the gateway: the policy's workingFolders;
 * the agent: `--session-root` and those, symlinks followed). Only an absolute path is taken:
 * the CLI reads a relative one from wherever earlier moves left it. INVALID_ARGUMENT otherwise.
 */
export function setCwdTarget(request: Record<string, unknown>): string | undefined {
  if (request.subtype !== 'set_cwd') return undefined;
  const path = request.path;
  if (typeof path !== 'string' || !path.startsWith('/') || path.length > 4096 || path.includes('\0')) {
    throw new TetherError('INVALID_ARGUMENT', `set_cwd needs an absolute folder path (got ${JSON.stringify(path)?.slice(0, 100)})`);
  }
  return path;
}

/** Who may send what: the agent owner's allowances (`--allow-engine-control`). */
export interface EngineControlAllowance {
  /** Subtypes sessions may send although they are not safe. */
  allowControls?: readonly string[];
}

/**
 * Throws unless this request may reach the engine: INVALID_ARGUMENT for a subtype Tether does
 * not know, PERMISSION_DENIED naming the subtype for one the agent's owner does not allow (in
 * the flags' words) or, with `role`, one the sender's session role may not send. Without
 * `role` (the agent, which knows no roles) only the owner's allowance is checked.
 */
export function checkControl(request: Record<string, unknown>, allowance: EngineControlAllowance, agent: string, role?: string): void {
  const subtype = request.subtype;
  const cls = controlClassOf(request);
  if (cls === undefined) {
    const name = typeof subtype === 'string' ? subtype.slice(0, 64) : String(subtype);
    throw new TetherError(
      'INVALID_ARGUMENT',
      `engine control "${name}" is not one this gateway knows (core/engine-controls.ts lists them); it was not sent`,
    );
  }
  const entry = CONTROLS[subtype as string];
  if (cls !== 'safe' && !allowance.allowControls?.includes(subtype as string)) {
    throw new TetherError(
      'PERMISSION_DENIED',
      `engine control "${subtype}" is not allowed by agent "${agent}" (${WORDS[cls]}); its owner can allow it with --allow-engine-control ${subtype}`,
    );
  }
  const needs: ControlRole = cls === 'safe' ? entry.role : 'owner';
  if (role !== undefined && needs === 'gateway') {
    throw new TetherError(
      'PERMISSION_DENIED',
      `engine control "${subtype}" is sent only by the gateway, on behalf of a member it checked: withdraw a queued prompt with session.withdraw_prompt (its author or the session's owner)`,
    );
  }
  if (role !== undefined && needs === 'owner' && role !== 'owner') {
    throw new TetherError(
      'PERMISSION_DENIED',
      `engine control "${subtype}" may be sent only by the session's owner${cls === 'safe' ? '' : ` (${WORDS[cls]})`}; this client is a ${role}`,
    );
  }
}

/**
 * Checks an owner's `--allow-engine-control` entry: a known subtype that can need allowing.
 * Returns a problem to report, or undefined when the entry is fine.
 */
export function allowControlProblem(name: string): string | undefined {
  const entry = Object.hasOwn(CONTROLS, name) ? CONTROLS[name] : undefined;
  if (!entry) return `"${name}" is not an engine control subtype (core/engine-controls.ts lists them)`;
  if (entry.class === 'safe') return `"${name}" is always allowed; nothing to allow`;
  return undefined;
}
