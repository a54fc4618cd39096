/**
 * The browser's half of `tether login`: the person allows it, and the page hands the
 * terminal's loopback listener a one-time code (`#cli-login=…`), or approves a terminal
 * elsewhere by the code it shows (`#device`).
 */
import { useState } from 'preact/hooks';
import type { Connection } from './connection';
import { TetherError } from '../../../core/errors.js';
import { linkTrouble } from './wording';

/** What `tether login` put in the address it opened: a loopback listener's request, or a device sign-in. */
export type CliLoginAsk = { kind: 'loopback'; port: number; challenge: string; state: string } | { kind: 'device' };

/** The `tether login` request in the address, if any (left in place: it survives a sign-in with the identity provider). */
export function cliLoginInHash(): CliLoginAsk | undefined {
  if (location.hash === '#device') return { kind: 'device' };
  const m = /^#cli-login=(\d{4,5})\.([\w-]{43})\.([\w-]{16,128})$/.exec(location.hash);
  return m ? { kind: 'loopback', port: Number(m[1]), challenge: m[2], state: m[3] } : undefined;
}

/** Asks the signed-in person whether `tether login` may act as them; Allow hands it its credential. */
export function CliLoginPanel({ conn, ask, who, onDone }: { conn: Connection; ask: CliLoginAsk; who: string; onDone: () => void }) {
  const [error, setError] = useState<string>();
  const [code, setCode] = useState('');
  const [approved, setApproved] = useState(false);
  const allow = async () => {
    setError(undefined);
    try {
      if (ask.kind === 'loopback') return location.assign(await conn.cliLogin(ask.port, ask.challenge, ask.state));
      await conn.approveDevice(code);
      setApproved(true);
    } catch (err) {
      setError(err instanceof TetherError ? err.message : linkTrouble(err));
    }
  };
  if (approved) {
    return (
      <main class="center signin">
        <h1>Terminal signed in</h1>
        <p>
          The terminal is signed in as <strong>{who}</strong>. You can close this tab.
        </p>
        <p>
          <button type="button" onClick={onDone}>
            Back to Tether
          </button>
        </p>
      </main>
    );
  }
  return (
    <main class="center signin">
      <h1>Sign in the terminal?</h1>
      <p>
        <code>tether login</code> {ask.kind === 'loopback' ? 'on this computer' : 'on another device'} asks to act as <strong>{who}</strong>{' '}
        on this gateway.
      </p>
      {ask.kind === 'device' && (
        <p>
          <label>
            Code the terminal shows{' '}
            <input name="user_code" autocomplete="off" value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} />
          </label>
        </p>
      )}
      <p class="muted">Allow it only if you just ran tether login yourself.</p>
      {error && (
        <p class="error" role="alert">
          Terminal sign-in failed: {error}
        </p>
      )}
      <p>
        <button type="button" onClick={() => void allow()}>
          Allow
        </button>{' '}
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </p>
    </main>
  );
}
