import { z } from 'zod';

/** pino's levels, plus silent. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** auto: pretty lines when stderr is a terminal, JSON lines otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** The logging keys every program has; only the default level differs. */
export function loggingKeys(defaultLevel: LogLevel) {
  return {
    logLevel: z
      .enum(LOG_LEVELS)
      .default(defaultLevel)
      .meta({ help: 'trace, debug, info, warn, error, fatal or silent', flag: 'log-level' }),
    logFormat: z
      .enum(LOG_FORMATS)
      .default('auto')
      .meta({ help: 'auto (pretty on a terminal, JSON lines otherwise), json or pretty', flag: 'log-format' }),
  };
}

/** A TCP port; 0 picks a free one. */
export function portKey() {
  return z.number().int().min(0).max(65535);
}

/**
 * A path key whose file `read` must accept when the configuration is loaded: whatever `read`
 * throws becomes the key's problem (its message), reported with every other at once.
 */
export function loadableFile(read: (path: string) => unknown) {
  return checkedString(read);
}

/** A non-empty string that `check` accepts; what it throws is the value's problem, in its words. */
export function checkedString(check: (value: string) => unknown) {
  return z
    .string()
    .min(1)
    .superRefine((value, ctx) => {
      try {
        check(value);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    });
}

/** A positive whole number of milliseconds (or bytes, or a count) with its default. */
export function positiveInt(defaultValue: number, help: string) {
  return z.number().int().positive().default(defaultValue).meta({ help });
}
