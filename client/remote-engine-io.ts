import type { Readable, Writable } from 'node:stream';
import type { TetherError } from '../core/errors.js';

/** The three streams of the process the SDK thinks it started. */
export interface RemoteEngineIo {
  /** NDJSON the SDK writes for the engine; read to its end (EOF ends the remote session). */
  input: Readable;
  /** Receives each engine stdout line exactly as the engine wrote it, plus `\n`. Not ended here. */
  output: Writable;
  /** Human diagnostics, what the CLI would print on stderr (whole lines with `\n`). */
  diagnostics: (text: string) => void;
  /** The environment the SDK gave the process: its SDK switches (core/protocol/sdk-env.ts) go to the engine. */
  env?: Record<string, string | undefined>;
}

/** How the remote engine (or the bridge, when it gave up) ended. */
export interface RemoteExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the bridge itself failed (gateway unreachable, refused, link lost for good). */
  error?: TetherError;
}
