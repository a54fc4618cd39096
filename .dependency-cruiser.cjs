/**
 * The house's layering rules (docs/architecture.md), checked by dependency-cruiser on every
 * import form (static, side-effect, re-export, dynamic import, require). `npm test` runs them
 * through test/layering.test.ts; `npx depcruise core gateway agent client bin` shows them too.
 */
const PROGRAMS = ['gateway', 'agent', 'client', 'bin'];

/** A package's resolved path (node_modules/NAME/…) or its bare name when unresolved. */
const pkg = (name) => `(^|node_modules/)${name}(/|$)`;

/**
 * The gateway's rooms (docs/architecture.md) and the only other gateway files each may import:
 * imports run down, never back up or across. A room may always import its own files.
 */
const ROOMS = [
  { room: 'audit', may: [] },
  { room: 'door', may: [] },
  { room: 'policy', may: ['audit/', 'door/principal\\.ts$'] },
  { room: 'usage', may: ['policy/', 'audit/', 'door/principal\\.ts$'] },
  { room: 'session', may: ['usage/', 'policy/', 'audit/', 'door/principal\\.ts$', 'metrics\\.ts$', 'plain-histogram\\.ts$'] },
  { room: 'directory', may: ['session/', 'usage/', 'policy/', 'audit/', 'door/', 'metrics\\.ts$', 'plain-histogram\\.ts$'] },
  { room: 'listen', may: ['door/', 'metrics\\.ts$', 'plain-histogram\\.ts$', 'readiness\\.ts$'] },
  {
    room: 'attention',
    may: [
      'session/session\\.ts$',
      'directory/session-directory\\.ts$',
      'door/principal\\.ts$',
      'usage/usage-desk\\.ts$',
      'cluster/cluster-keys\\.ts$',
      'metrics\\.ts$',
    ],
  },
];

/** The JSON-RPC engine's modules: they run in the browser too (the web page bundles them). */
const BROWSER_RPC = '^core/rpc/(engine|envelope)\\.ts$';

/** Each I/O library and the only files that may import it (style.md: I/O lives at the edges). */
const EDGES = [
  {
    name: 'ws-and-http-at-the-edges',
    module: `${pkg('ws')}|^(node:)?https?$`,
    allowed:
      '^(core/channel/ws\\.ts|core/link/dial-ws\\.ts|gateway/listen/listen-(ws|acp)\\.ts|gateway/server\\.ts|gateway/listen/listen-http[^/]*\\.ts|gateway/listen/http-cookies\\.ts|gateway/door/http-answer\\.ts|bin/login-listener\\.ts)$',
  },
  {
    name: 'grpc-at-the-edges',
    module: pkg('@grpc/[^/]+'),
    allowed: '^(core/channel/(grpc|proto)\\.ts|core/link/dial-grpc\\.ts|gateway/listen/listen-grpc\\.ts|gateway/listen/grpc-[^/]*\\.ts)$',
  },
  {
    name: 'processes-at-the-edges',
    module: '^(node:)?child_process$',
    allowed:
      '^(agent/(engine-process|engine-version|worktree|demo-engine/shell|folder-view/git-run|acp-engine/acp-child|acp-engine/terminals)|bin/open-browser)\\.ts$',
  },
  { name: 'openid-client-in-the-door', module: pkg('openid-client'), allowed: '^gateway/door/oidc-sign-in\\.ts$' },
  { name: 'jose-in-core-auth', module: pkg('jose'), allowed: '^core/auth/' },
  { name: 'nats-in-the-gateway-cluster', module: pkg('@nats-io/[^/]+'), allowed: '^gateway/cluster/' },
  { name: 'opentelemetry-in-core-telemetry', module: pkg('@opentelemetry/[^/]+'), allowed: '^core/telemetry/otel-sdk\\.ts$' },
];

module.exports = {
  forbidden: [
    ...EDGES.map((e) => ({
      name: e.name,
      severity: 'error',
      comment: `${e.module} may be imported only by ${e.allowed}`,
      from: { pathNot: e.allowed },
      to: { path: e.module },
    })),
    {
      name: 'telemetry-sdk-loaded-only-when-on',
      severity: 'error',
      comment:
        'the OpenTelemetry SDK is loaded only when tracing is configured: core/telemetry/otel-sdk.ts is imported by a dynamic import of core/telemetry/telemetry.ts alone',
      from: {},
      to: { path: '^core/telemetry/otel-sdk\\.ts$', dependencyTypesNot: ['dynamic-import'] },
    },
    {
      name: 'telemetry-sdk-started-in-one-place',
      severity: 'error',
      comment: 'core/telemetry/telemetry.ts decides whether tracing is on; only it loads core/telemetry/otel-sdk.ts',
      from: { pathNot: '^core/telemetry/telemetry\\.ts$' },
      to: { path: '^core/telemetry/otel-sdk\\.ts$' },
    },
    {
      name: 'core-imports-no-program',
      severity: 'error',
      comment: 'core/ is what the three programs share; it imports none of them',
      from: { path: '^core/' },
      to: { path: `^(${PROGRAMS.join('|')})/` },
    },
    {
      name: 'core-wire-at-the-bottom',
      severity: 'error',
      comment:
        'core/wire/ is the one home of a frame (layout, codecs, fast checks), below the channels and the protocol: of core/ it imports only itself and the error table',
      from: { path: '^core/wire/' },
      to: { path: '^core/', pathNot: '^core/(wire/|errors\\.ts$)' },
    },
    ...[
      ['channel', 'protocol'],
      ['protocol', 'channel'],
    ].map(([from, to]) => ({
      name: `core-${from}-imports-no-${to}`,
      severity: 'error',
      comment: 'the channels (the seam) and the protocol (the schemas) both stand on core/wire/ and import neither each other',
      from: { path: `^core/${from}/` },
      to: { path: `^core/${to}/` },
    })),
    ...['gateway', 'agent', 'client'].map((program) => ({
      name: `${program}-meets-others-only-through-core`,
      severity: 'error',
      comment: 'the programs meet only on the wire; only bin/ (the composition root) imports several',
      from: { path: `^${program}/`, pathNot: '^client/web/' },
      to: { path: `^(${PROGRAMS.filter((p) => p !== program).join('|')})/` },
    })),
    ...ROOMS.map(({ room, may }) => ({
      name: `gateway-${room}-imports-down`,
      severity: 'error',
      comment: `gateway/${room}/ may import, of the gateway, only itself${may.length ? ` and ${may.join(', ')}` : ''}`,
      from: { path: `^gateway/${room}/` },
      to: { path: '^gateway/', pathNot: `^gateway/(${[`${room}/`, ...may].join('|')})` },
    })),
    {
      name: 'gateway-session-behind-its-face',
      severity: 'error',
      comment:
        "one session's parts are its own: other rooms import session/session.ts (Session and what it hands on) or the store port session/session-store.ts",
      from: { pathNot: '^gateway/session/' },
      to: { path: '^gateway/session/', pathNot: '^gateway/session/(session|session-store)\\.ts$' },
    },
    {
      name: 'web-page-is-a-browser-program',
      severity: 'error',
      comment:
        "client/web is the page the gateway serves, a client running in a browser: it may use the wire types of core/protocol, the error table, the JSON-RPC engine, the clients' backoff and heartbeat bound, the tool view, the session-rule reading and the queue, turn and worktree wording it shares with the terminal client, and its UI libraries, nothing of Node",
      from: { path: '^client/web/' },
      to: {
        pathNot: `^(client/web/|core/protocol/|core/errors\\.ts$|${BROWSER_RPC}|core/util/backoff\\.ts$|core/link/heartbeat\\.ts$|client/tool-view\\.ts$|client/permission-policy\\.ts$|client/queue-view\\.ts$|client/turn-view\\.ts$|client/worktree-view\\.ts$)|${pkg('(preact|marked|dompurify)')}`,
      },
    },
    {
      name: 'rpc-engine-runs-in-a-browser',
      severity: 'error',
      comment:
        'the JSON-RPC engine serves the gateway, the agent, the client library and the web page: it imports only itself and the error table, nothing of Node (zod only as types)',
      from: { path: BROWSER_RPC },
      to: { pathNot: `${BROWSER_RPC}|^core/errors\\.ts$` },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'an import that resolves to nothing is a broken build waiting to happen',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules|test)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      extensions: ['.ts', '.tsx', '.js', '.mjs', '.cjs', '.json'],
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
    moduleSystems: ['es6', 'cjs'],
  },
};
