import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Logger } from '../../core/logging.js';
import { BrowserSignInRecord, type BrowserSessions } from './browser-sessions.js';

/** The file inside the state folder that keeps browser sign-ins across a restart. */
export const BROWSER_SIGN_INS_FILE = 'browser-sign-ins.json';

const SignInFile = z.object({ version: z.literal(1), sign_ins: z.array(BrowserSignInRecord) });

/**
 * Keeps a gateway's browser sign-ins in STATE_DIR/browser-sign-ins.json (0600), so a restart
 * signs no browser out. The file holds each cookie's SHA-256, never a cookie. It is written
 * whole (write then rename) on each sign-in, sign-out and mirrored use: sign-ins are rare
 * and uses are mirrored at most once a minute each, so a synchronous write costs little and
 * a kill -9 loses nothing said before it. A file that cannot be read is set aside in the log
 * and the gateway starts with no sign-ins (people sign in again) rather than not at all.
 */
export class BrowserSignInFile {
  private readonly path: string;

  private constructor(
    stateDir: string,
    private readonly browser: BrowserSessions,
    private readonly log: Logger | undefined,
  ) {
    this.path = join(stateDir, BROWSER_SIGN_INS_FILE);
  }

  /** Reads the file into `browser` and keeps it up to date from then on. Returns the function that stops it. */
  static keep(stateDir: string, browser: BrowserSessions, log?: Logger): () => void {
    const file = new BrowserSignInFile(stateDir, browser, log);
    for (const r of file.read()) browser.adopt(r);
    const write = () => file.write();
    return browser.mirrorTo({ put: write, drop: write });
  }

  private read(): BrowserSignInRecord[] {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log?.warn({ err: String(err) }, 'cannot read the browser sign-ins file');
      return [];
    }
    try {
      return SignInFile.parse(JSON.parse(text)).sign_ins;
    } catch (err) {
      this.log?.warn(
        { file: this.path, err: (err as Error).message.slice(0, 200) },
        'the browser sign-ins file is not valid: starting with none',
      );
      return [];
    }
  }

  private write(): void {
    const tmp = `${this.path}.${process.pid}.tmp`;
    try {
      writeFileSync(tmp, JSON.stringify({ version: 1, sign_ins: this.browser.records() }), { mode: 0o600 });
      renameSync(tmp, this.path);
    } catch (err) {
      // Not fatal: this gateway keeps its sign-ins in memory; a restart would sign those browsers out.
      this.log?.warn({ err: String(err) }, 'cannot write the browser sign-ins file');
    }
  }
}
