import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';
import { prettyDestination } from './log-pretty.js';

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
 * takes a logger or stays silent ({@link silentLogger}). Writes to stderr, so stdout stays
 * free for what a command prints: JSON lines, or pretty lines for people (`format: 'pretty'`,
 * or 'auto' — the default — when stderr is a terminal). A `destination` always gets JSON.
 * Secrets are redacted ({@link REDACT_PATHS}) before either form is written.
 */
export function createLogger(
  opts: { level?: string; name?: string; format?: 'auto' | 'json' | 'pretty'; destination?: DestinationStream } = {},
): Logger {
  const options: LoggerOptions = {
    name: opts.name,
    level: opts.level ?? process.env.TETHER_LOG_LEVEL ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
  };
  if (opts.destination) return pino(options, opts.destination);
  const format = opts.format ?? 'auto';
  const pretty = format === 'pretty' || (format === 'auto' && process.stderr.isTTY === true);
  return pino(
    options,
    pretty ? prettyDestination(process.stderr, process.stderr.isTTY === true) : pino.destination({ fd: 2, sync: false }),
  );
}

/** A logger that writes nothing: the default for library code. */
export const silentLogger: Logger = pino({ level: 'silent' });

/**
 * A child logger's lines without the child: each goes through `root` with `bindings` merged
 * in (the same fields a child would print). What a gateway keeps per connection, where a
 * pino child costs about half a kilobyte of heap for each of thousands of idle connections.
 * `logger` makes the real child, once, for code that needs a whole Logger.
 */
export class BoundLog {
  private child: Logger | undefined;

  constructor(
    private readonly root: Logger,
    private readonly bindings: Record<string, unknown>,
  ) {}

  /** The child itself (made on first use). */
  get logger(): Logger {
    return (this.child ??= this.root.child(this.bindings));
  }

  debug(obj: object, msg: string): void {
    if (this.root.isLevelEnabled('debug')) this.root.debug({ ...this.bindings, ...obj }, msg);
  }

  info(obj: object, msg: string): void {
    if (this.root.isLevelEnabled('info')) this.root.info({ ...this.bindings, ...obj }, msg);
  }

  warn(obj: object, msg: string): void {
    if (this.root.isLevelEnabled('warn')) this.root.warn({ ...this.bindings, ...obj }, msg);
  }

  error(obj: object, msg: string): void {
    if (this.root.isLevelEnabled('error')) this.root.error({ ...this.bindings, ...obj }, msg);
  }
}
