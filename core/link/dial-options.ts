/** Defaults every dialer applies. */
export const DIAL_DEFAULTS = {
  /** Time to connect and have the gateway accept the stream (threats.md part 3: 20 s). */
  connectTimeoutMs: 20_000,
} as const;

/**
 * What a dialer is told: settings every transport honours at the top, settings of one
 * transport under its own key. A setting only one transport has cannot be given to the other
 * by mistake: WebSocket pings are `ws.pingIntervalMs`, not a field gRPC would silently drop.
 */
export interface DialOptions {
  token?: string;
  /** PEM of a private CA to trust (wss://, grpcs://). */
  ca?: Buffer;
  /** PEM client certificate and key, for gateways that require mutual TLS. */
  tlsCert?: Buffer;
  tlsKey?: Buffer;
  maxFrameBytes?: number;
  /** Default DIAL_DEFAULTS.connectTimeoutMs (20 s). */
  connectTimeoutMs?: number;
  /** Settings of ws:// and wss:// links. */
  ws?: WsDialSettings;
  /** Settings of grpc:// and grpcs:// links. */
  grpc?: GrpcDialSettings;
}

/** WebSocket protocol-level pings, a backstop under the application heartbeat. */
export interface WsDialSettings {
  /** Default WS_PING_DEFAULTS.pingIntervalMs (15 s); 0 disables. */
  pingIntervalMs?: number;
  /** Time without a pong before the socket is declared dead; default WS_PING_DEFAULTS.pingTimeoutMs (10 s). */
  pingTimeoutMs?: number;
}

/** HTTP/2 keepalive pings of the gRPC connection. */
export interface GrpcDialSettings {
  /** Default GRPC_DEFAULTS.keepaliveTimeMs. */
  keepaliveTimeMs?: number;
  /** Default GRPC_DEFAULTS.keepaliveTimeoutMs. */
  keepaliveTimeoutMs?: number;
}
