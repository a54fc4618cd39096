import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

/** Paths pino must never print: tokens, auth headers, tickets. */
export const REDACT_PATHS = [
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["sec-websocket-protocol"]',
  'headers.cookie',
  'metadata.authorization',
  'ticket',
  '*.ticket',
  'secret',
  '*.secret',
];

/**
 * A URL or path safe to log: the values of `ticket`, `token` and `access_token` query
 * parameters are replaced by "[redacted]". Pass every URL through this before logging it.
 */
export function scrubUrl(url: string): string {
  return url.replace(/([?&](?:ticket|token|access_token)=)[^&#]*/gi, '$1[redacted]');
}

/**
 * The root logger of one program (gateway, agent, CLI). Library code never calls this; it
 * takes a logger or stays silent ({@link silentLogger}). JSON to stderr by default, so stdout
 * stays free for what a command prints.
 */
export function createLogger(opts: { level?: string; name?: string; destination?: DestinationStream } = {}): Logger {
  const options: LoggerOptions = {
    name: opts.name,
    level: opts.level ?? process.env.TETHER_LOG_LEVEL ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
  };
  return pino(options, opts.destination ?? pino.destination({ fd: 2, sync: false }));
}

/** A logger that writes nothing: the default for library code. */
export const silentLogger: Logger = pino({ level: 'silent' });
