/** The page: sign-in, then the dashboard or one session, with the link banner above. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { LiveRegion, announce } from './announcer';
import { Connection } from './connection';
import { Dashboard } from './dashboard';
import { SessionPage } from './session-page';
import { OpenSession } from './session';
import { openFailure } from './messages';
import { TetherError } from '../../../core/errors.js';
import { linkTrouble } from './wording';
import { useStore } from './store';
import { CliLoginPanel, cliLoginInHash, type CliLoginAsk } from './cli-login';
import { NotifyToggle, WebhookSettings } from './notify';

const conn = new Connection();

/** The sign-in code of a sign-in link (`#login=…`), removed from the address bar at once. */
function takeLoginCode(): string | undefined {
  const m = /^#login=([\w.-]+)$/.exec(location.hash);
  if (!m) return undefined;
  history.replaceState(null, '', location.pathname);
  return m[1];
}

/** The session named in the address (`#session=ID`), e.g. from a notification. */
function sessionInHash(): string | undefined {
  return /^#session=([\w.-]+)$/.exec(location.hash)?.[1];
}

/** The page with its live region, which stays through every view (sign-in, dashboard, session). */
export function App() {
  return (
    <>
      <Views />
      <LiveRegion />
    </>
  );
}

function Views() {
  const link = useStore(conn.state);
  const [booting, setBooting] = useState(true);
  const [error, setError] = useState<string>();
  const [session, setSession] = useState<OpenSession>();
  const [cliAsk, setCliAsk] = useState<CliLoginAsk | undefined>(cliLoginInHash);

  // The link's changes are said aloud: lost (with why) and back; the retries between are not.
  const wasDown = useRef(false);
  useEffect(() => {
    if (link.status === 'down' && !wasDown.current) announce(link.message ?? 'The connection to the gateway was lost.');
    else if (link.status === 'connected' && wasDown.current) announce('Connected to the gateway again.');
    if (link.status === 'down' || link.status === 'connected') wasDown.current = link.status === 'down';
  }, [link.status]);

  useEffect(() => {
    void (async () => {
      try {
        await conn.probe();
        const code = takeLoginCode();
        if (code) await conn.signIn(code);
      } catch (err) {
        conn.signOut(''); // the sign-in code was refused: nothing to keep
        setError(err instanceof TetherError ? err.message : linkTrouble(err)); // the gateway's words, or what the network did
        return setBooting(false);
      }
      await conn.start(); // with no credential the sign-in page; only refused credentials sign out with a message (connection.ts)
      const id = sessionInHash();
      // A session that cannot be opened (gone, not ours, unreachable): back to the dashboard, still signed in.
      if (id && conn.state.get().status === 'connected') await open(() => OpenSession.attach(conn, id, false), true);
      setBooting(false);
    })();
  }, []);

  const open = async (make: () => Promise<OpenSession>, fromAddress = false) => {
    setError(undefined);
    try {
      const s = await make();
      history.replaceState(null, '', `#session=${s.id}`);
      setSession(s);
    } catch (err) {
      if (fromAddress) history.replaceState(null, '', location.pathname);
      setError(openFailure(err, fromAddress));
    }
  };
  const leave = () => {
    void session?.close();
    history.replaceState(null, '', location.pathname);
    setSession(undefined);
  };

  if (booting)
    return (
      <main class="center">
        <p>Connecting…</p>
      </main>
    );
  if (link.status === 'signed-out') {
    return (
      <main class="center signin">
        <h1>Tether</h1>
        {error ? (
          <p class="error" role="alert">
            Sign-in failed: {error}
          </p>
        ) : link.message ? (
          <p>{link.message}</p>
        ) : null}
        {link.oidc && (
          <p>
            <button type="button" onClick={() => conn.signInWithProvider(cliAsk ? location.hash : '')}>
              Sign in with {link.oidc.name}
            </button>
          </p>
        )}
        <p>
          {link.oidc ? 'Or open' : 'Open'} the sign-in link that <code>tether up</code> printed, or ask for one on the gateway's server:
        </p>
        <pre>tether login-link --sub YOUR-NAME --url {location.origin}</pre>
        <p class="muted">A link works once and for a few minutes; this browser stays signed in, in every tab, until you sign out.</p>
      </main>
    );
  }
  if (cliAsk && link.status === 'connected') {
    const done = () => {
      history.replaceState(null, '', location.pathname);
      setCliAsk(undefined);
    };
    return <CliLoginPanel conn={conn} ask={cliAsk} who={link.name ?? link.principal ?? ''} onDone={done} />;
  }
  return (
    <>
      {/* Header and link status stay in sight wherever the page is scrolled (the bottom, mostly). */}
      <div class="sticky-top">
        <header class="top">
          <button type="button" class="brand" onClick={leave} title="Back to the dashboard">
            Tether
          </button>
          <span class="who" data-testid="principal" title={link.name ? link.principal : undefined}>
            {link.name ?? link.principal}
          </span>
          <NotifyToggle />
          <WebhookSettings />
          {link.auth && (
            <button
              type="button"
              onClick={() => {
                void session?.close();
                setSession(undefined);
                void conn.logOut();
              }}
            >
              Sign out
            </button>
          )}
        </header>
        {link.status !== 'connected' && (
          <div class="banner" data-testid="link-banner">
            {link.message ?? 'Connecting…'}
          </div>
        )}
        {error && (
          <div class="banner error" role="alert">
            {error}
          </div>
        )}
      </div>
      {session ? (
        <SessionPage session={session} onLeave={leave} />
      ) : (
        <Dashboard
          conn={conn}
          onStart={(agent, options, engine) => open(() => OpenSession.create(conn, agent, options, engine))}
          onAttach={(id, readOnly) => open(() => OpenSession.attach(conn, id, readOnly))}
        />
      )}
    </>
  );
}
