import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { TetherError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/logging.js';
import { Policy } from '../../core/policy/policy.js';

/** Changes within this time are read once (editors write a file in several steps). */
export const POLICY_RELOAD_DEBOUNCE_MS = 200;

/** Where the gateway's routing core reads the policy in force: always the newest good one. */
export interface PolicyProvider {
  readonly current: Policy;
}

/** A fixed policy (tests, a gateway without `--policy`). */
export class StaticPolicy implements PolicyProvider {
  constructor(readonly current: Policy = Policy.EMPTY) {}
}

/** Reads and checks one policy file (JSON, or YAML when it is not JSON); throws INVALID_ARGUMENT naming the path. */
export function readPolicyFile(path: string): Policy {
  return parsePolicyText(readPolicyText(path), path);
}

function readPolicyText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `policy ${path}: cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

function parsePolicyText(text: string, path: string): Policy {
  // An empty file is what a reload may read halfway through a write: never "no rules".
  if (text.trim() === '')
    throw new TetherError('INVALID_ARGUMENT', `policy ${path}: the file is empty (write {} for a policy without rules)`);
  let value: unknown;
  try {
    value = /^\s*[{[]/.test(text) ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new TetherError('INVALID_ARGUMENT', `policy ${path}: not valid JSON or YAML (${(err as Error).message.split('\n')[0]})`);
  }
  return Policy.compile(value, `policy ${path}`);
}

/**
 * The policy of `--policy FILE`: read at start (a bad file stops the gateway from starting),
 * then read again when anything in its folder changes (fs.watch on the folder, debounced, so
 * an editor's rename-over-the-file and a mounted config map's symlink swap are seen; an
 * unchanged text is not reloaded) and on SIGHUP (always reloaded). A file that fails a reload
 * is refused with its error logged and passed to `onReload`; the policy in force stays.
 */
export class FilePolicy implements PolicyProvider {
  private policy: Policy;
  /** The text of the policy in force, or of the last refused file (so it is not refused again and again). */
  private lastText: string;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly onHup = () => this.reload('SIGHUP');
  /** Called after each reload attempt: the error when the file was refused. */
  onReload: ((err: TetherError | undefined) => void) | undefined;

  constructor(
    readonly path: string,
    private readonly log: Logger = silentLogger,
  ) {
    this.path = resolve(path);
    this.lastText = readPolicyText(this.path);
    this.policy = parsePolicyText(this.lastText, this.path);
  }

  get current(): Policy {
    return this.policy;
  }

  /** Starts watching the file and listening for SIGHUP. */
  watch(): this {
    this.watcher = watch(dirname(this.path), () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.reload('file changed', true), POLICY_RELOAD_DEBOUNCE_MS);
      this.timer.unref();
    });
    this.watcher.unref();
    process.on('SIGHUP', this.onHup);
    return this;
  }

  /** Reads the file again; keeps the policy in force when it is refused. `onlyIfChanged`: skip an unchanged text. */
  reload(why: string, onlyIfChanged = false): void {
    try {
      const text = readPolicyText(this.path);
      if (onlyIfChanged && text === this.lastText) return;
      this.lastText = text;
      this.policy = parsePolicyText(text, this.path);
      this.log.info({ policy: this.path, why }, 'policy reloaded');
      this.onReload?.(undefined);
    } catch (err) {
      const e = err instanceof TetherError ? err : new TetherError('INVALID_ARGUMENT', String(err));
      this.log.error({ policy: this.path, why, err: e.message }, 'policy file refused; the previous policy stays in force');
      this.onReload?.(e);
    }
  }

  close(): void {
    clearTimeout(this.timer);
    this.watcher?.close();
    process.off('SIGHUP', this.onHup);
  }
}
