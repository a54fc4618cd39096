/** The browser's half of `tether login`: the person allows it, the page hands its loopback listener a one-time code. */
import { useState } from 'preact/hooks';
import type { Connection } from './connection';
import { TetherError } from '../../../core/errors.js';
import { linkTrouble } from './wording';

/** What `tether login` put in the address it opened: `#cli-login=PORT.CHALLENGE.STATE`. */
export interface CliLoginAsk {
  port: number;
  challenge: string;
  state: string;
}

/** The `tether login` request in the address, if any (left in place: it survives a sign-in with the identity provider). */
export function cliLoginInHash(): CliLoginAsk | undefined {
  const m = /^#cli-login=(\d{4,5})\.([\w-]{43})\.([\w-]{16,128})$/.exec(location.hash);
  return m ? { port: Number(m[1]), challenge: m[2], state: m[3] } : undefined;
}

/** Asks the signed-in person whether `tether login` on this computer may act as them; Allow goes to its listener. */
export function CliLoginPanel({ conn, ask, who, onDone }: { conn: Connection; ask: CliLoginAsk; who: string; onDone: () => void }) {
  const [error, setError] = useState<string>();
  const allow = async () => {
    try {
      location.assign(await conn.cliLogin(ask.port, ask.challenge, ask.state));
    } catch (err) {
      setError(err instanceof TetherError ? err.message : linkTrouble(err));
    }
  };
  return (
    <main class="center signin">
      <h1>Sign in the terminal?</h1>
      <p>
        <code>tether login</code> on this computer asks to act as <strong>{who}</strong> on this gateway.
      </p>
      <p class="muted">Allow it only if you just ran tether login yourself.</p>
      {error && <p class="error" role="alert">Terminal sign-in failed: {error}</p>}
      <p>
        <button onClick={() => void allow()}>Allow</button> <button onClick={onDone}>Cancel</button>
      </p>
    </main>
  );
}
