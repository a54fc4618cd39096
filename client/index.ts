/** The Tether client library: `import { GatewayClient } from 'tether/client'`. */
export { GatewayClient, type ConnectOptions } from './gateway-client.js';
export { RemoteSession, type SessionItem, type CanUseTool, type PermissionDecision, type SendOptions } from './remote-session.js';
export {
  asPermissionRequest,
  askQuestions,
  answerQuestions,
  type PermissionRequest,
  type PermissionAnswer,
  type AskQuestion,
} from './permission-policy.js';
export { remoteSpawn, withRemoteEngine, type RemoteSpawnOptions, type RemoteProcess, type SpawnRequest } from './remote-spawn.js';
export { TetherError, type ErrorCode } from '../core/errors.js';
export type { AgentInfo, SessionInfo, CreateProgress } from '../core/protocol/methods.js';
export type { SessionOptions, EngineKind } from '../core/protocol/session-options.js';
export type { TetherEvent, SessionState, Role, PromptPriority, QueuedPrompt } from '../core/protocol/events.js';
export type { LinkStatus } from '../core/link/link.js';
export { startTelemetry } from '../core/telemetry/telemetry.js';
export type { Telemetry } from '../core/telemetry/tracer.js';
