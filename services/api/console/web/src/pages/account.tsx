import { useEffect, useState } from 'preact/hooks';
import { app, type Me } from '../api.js';
import { fragmentToken } from '../router.js';
import { Alert, Notice, PageTitle } from '../ui.js';

/** Sign-in, the two links (setup and invitation) and the password change (docs/web-app.md). */

const MIN_PASSWORD = 10;

export function SignIn({ onSignedIn }: { onSignedIn: (me: Me) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  // Whether the service offers single sign-on (docs/web-app.md, "Single sign-on"); unknown: not offered.
  const [sso, setSso] = useState(false);
  useEffect(() => {
    app<{ data: { sso: boolean } }>('GET', '/sign-in/options').then(
      ({ data }) => setSso(data.sso),
      () => setSso(false),
    );
  }, []);
  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const { data } = await app<{ data: Me }>('POST', '/sign-in', { email, password });
      onSignedIn(data);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  return (
    <section class="narrow">
      <PageTitle>Sign in</PageTitle>
      <form onSubmit={submit}>
        <label for="email">Email</label>
        <input id="email" type="email" autoComplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="password">Password</label>
        <input id="password" type="password" autoComplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <Alert error={error} />
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
      {sso ? (
        <div class="sso">
          <p class="hint">Or with your organization's identity provider:</p>
          {/* A navigation to the server, which sends the browser on to the provider. */}
          <a class="button" href="/app/api/oidc/start">
            Sign in with SSO
          </a>
        </div>
      ) : null}
    </section>
  );
}

/** A new password, typed twice: the form of both links and of the change. */
function NewPassword(props: { value: string; again: string; onValue: (v: string) => void; onAgain: (v: string) => void; label?: string }) {
  return (
    <>
      <label for="new-password">{props.label ?? 'New password'}</label>
      <input
        id="new-password"
        type="password"
        autoComplete="new-password"
        required
        minLength={MIN_PASSWORD}
        maxLength={200}
        aria-describedby="new-password-hint"
        value={props.value}
        onInput={(e) => props.onValue(e.currentTarget.value)}
      />
      <span id="new-password-hint" class="hint">
        At least {MIN_PASSWORD} characters.
      </span>
      <label for="new-password-again">Repeat it</label>
      <input id="new-password-again" type="password" autoComplete="new-password" required value={props.again} onInput={(e) => props.onAgain(e.currentTarget.value)} />
    </>
  );
}

function mismatch(password: string, again: string): Error | null {
  return password === again ? null : new Error('The two passwords differ');
}

/** `/setup#token=…` (a first admin, from `users create`) and `/invite#token=…` (an invitation). */
export function LinkPage({ kind }: { kind: 'setup' | 'invite' }) {
  const [token, setToken] = useState(fragmentToken);
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Another link opened in this tab changes only the fragment: no new page load.
  useEffect(() => {
    const follow = () => {
      setToken(fragmentToken());
      setError(null);
      setDone(null);
    };
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);
  const title = kind === 'setup' ? 'Choose your password' : 'Accept the invitation';
  async function submit(event: Event) {
    event.preventDefault();
    const problem = mismatch(password, again);
    if (problem && kind === 'setup') return setError(problem);
    setBusy(true);
    setError(null);
    try {
      const path = kind === 'setup' ? '/password-setup' : '/invitations/accept';
      const { data } = await app<{ data: { email: string } }>('POST', path, { token, password });
      // The link is used: take it out of the address bar and history.
      history.replaceState(null, '', location.pathname);
      setDone(data.email);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }
  if (done) {
    return (
      <section class="narrow">
        <PageTitle>{kind === 'setup' ? 'Password set' : 'Invitation accepted'}</PageTitle>
        <Notice>You can now sign in as {done}.</Notice>
        <p>
          <a href="/sign-in">Sign in</a>
        </p>
      </section>
    );
  }
  if (!token) {
    return (
      <section class="narrow">
        <PageTitle>{title}</PageTitle>
        <p class="alert" role="alert">
          This link is incomplete: open the whole link you were given.
        </p>
      </section>
    );
  }
  return (
    <section class="narrow">
      <PageTitle>{title}</PageTitle>
      <form onSubmit={submit}>
        {kind === 'invite' ? (
          <>
            <p class="hint">New here? Choose a password. Already have an account? Enter its password.</p>
            <label for="new-password">Password</label>
            <input
              id="new-password"
              type="password"
              autoComplete="new-password"
              required
              maxLength={200}
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          </>
        ) : (
          <NewPassword value={password} again={again} onValue={setPassword} onAgain={setAgain} />
        )}
        <Alert error={error} />
        <button type="submit" class="primary" disabled={busy}>
          {kind === 'setup' ? 'Set password' : 'Accept'}
        </button>
      </form>
    </section>
  );
}

export function ChangePassword() {
  const [current, setCurrent] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  async function submit(event: Event) {
    event.preventDefault();
    setDone(false);
    const problem = mismatch(password, again);
    if (problem) return setError(problem);
    setError(null);
    try {
      await app('POST', '/password', { current_password: current, new_password: password });
      setCurrent('');
      setPassword('');
      setAgain('');
      setDone(true);
    } catch (failure) {
      setError(failure);
    }
  }
  return (
    <section class="narrow">
      <PageTitle>Change password</PageTitle>
      <form onSubmit={submit}>
        <label for="current-password">Current password</label>
        <input id="current-password" type="password" autoComplete="current-password" required value={current} onInput={(e) => setCurrent(e.currentTarget.value)} />
        <NewPassword value={password} again={again} onValue={setPassword} onAgain={setAgain} />
        <Alert error={error} />
        {done && <Notice>Password changed. Your other sessions have been signed out.</Notice>}
        <button type="submit" class="primary">
          Change password
        </button>
      </form>
    </section>
  );
}

