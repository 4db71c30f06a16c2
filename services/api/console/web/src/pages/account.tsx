import { useEffect, useState } from 'preact/hooks';
import { app, type Me } from '../api.js';
import { fragmentToken } from '../router.js';
import { useAction, useLoad } from '../list.js';
import { Alert, besidesFields, FieldError, fieldMessage, formatTime, Notice, PageTitle } from '../ui.js';

/** Sign-in, the two links (setup and invitation) and the password change (docs/web-app.md). */

const MIN_PASSWORD = 10;

export function SignIn({ onSignedIn }: { onSignedIn: (me: Me) => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction();
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
    const answer = await action.run(() => app<{ data: Me }>('POST', '/sign-in', { email, password }));
    if (answer) onSignedIn(answer.data);
  }
  return (
    <section class="narrow">
      <PageTitle>Sign in</PageTitle>
      <form onSubmit={submit}>
        <label for="email">Email</label>
        <input id="email" type="email" autoComplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="password">Password</label>
        <input id="password" type="password" autoComplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <Alert error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
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

/** A new password, typed twice: the form of both links and of the change (docs/console.md, "Getting in"). */
function NewPassword(props: {
  value: string;
  again: string;
  onValue: (v: string) => void;
  onAgain: (v: string) => void;
  /** Whether the two differ and the person was told (a submit was tried, or they left the second field). */
  mismatch: boolean;
  onLeaveAgain: () => void;
  /** The server's refusal of the new password, shown beside it. */
  error: string | null;
  label?: string;
}) {
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
        aria-describedby="new-password-hint new-password-error"
        aria-invalid={props.error ? true : undefined}
        value={props.value}
        onInput={(e) => props.onValue(e.currentTarget.value)}
      />
      <span id="new-password-hint" class="hint">
        At least {MIN_PASSWORD} characters.
      </span>
      <FieldError id="new-password-error" message={props.error} />
      <label for="new-password-again">Repeat it</label>
      <input
        id="new-password-again"
        type="password"
        autoComplete="new-password"
        required
        maxLength={200}
        aria-describedby="new-password-again-error"
        aria-invalid={props.mismatch ? true : undefined}
        value={props.again}
        onInput={(e) => props.onAgain(e.currentTarget.value)}
        onBlur={props.onLeaveAgain}
      />
      <FieldError id="new-password-again-error" message={props.mismatch ? 'The two passwords differ: type the same one twice.' : null} />
    </>
  );
}

/** The state of a password typed twice: a mismatch is shown once the person submits or leaves the second field, never sent. */
function useTwice() {
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [told, setTold] = useState(false);
  const mismatch = told && password !== again;
  return {
    password,
    again,
    mismatch,
    reset() {
      setPassword('');
      setAgain('');
      setTold(false);
    },
    /** Whether the form may be sent; otherwise the mismatch shows and the second field takes the focus. */
    ready(): boolean {
      setTold(true);
      if (password === again) return true;
      document.getElementById('new-password-again')?.focus();
      return false;
    },
    fields: (error: string | null, label?: string) => (
      <NewPassword
        value={password}
        again={again}
        onValue={setPassword}
        onAgain={setAgain}
        mismatch={mismatch}
        onLeaveAgain={() => setTold(told || again !== '')}
        error={error}
        label={label}
      />
    ),
  };
}

type LinkStatus = 'valid' | 'used' | 'expired' | 'cancelled' | 'replaced' | 'invalid';

interface LinkCheck {
  kind: 'setup' | 'invitation';
  status: LinkStatus;
  email?: string;
  expires_at?: string;
  existing_account?: boolean;
}

/** What a link that no longer works says, instead of a form (docs/web-app.md, "Checking a link"). */
const LINK_REFUSALS: Record<Exclude<LinkStatus, 'valid'>, { title: string; text: string }> = {
  used: { title: 'This link was already used', text: 'It works once, and it has. Sign in with your password; if you have lost it, ask an administrator for a new link.' },
  expired: { title: 'This link has expired', text: 'Links work for 72 hours. Ask an administrator for a new one, or sign in if you already have a password.' },
  cancelled: { title: 'This invitation was cancelled', text: 'An administrator withdrew it. Ask them for a new one, or sign in if you already have an account.' },
  replaced: { title: 'A newer link was made', text: 'Only the newest link you were given works: open that one, or sign in if you already have a password.' },
  invalid: { title: 'This link is not valid', text: 'Open the whole link you were given, exactly as it is; or sign in if you already have a password.' },
};

function SignInLink() {
  return (
    <p>
      <a href="/sign-in">Sign in</a>
    </p>
  );
}

/**
 * `/setup#token=…` (`users create`, or a new link) and `/invite#token=…` (an invitation). The page
 * asks first whether the link still works, and shows a form only if it does; `onUsed` runs once
 * the link was used (it may have ended this browser's own session).
 */
export function LinkPage({ kind, onUsed }: { kind: 'setup' | 'invite'; onUsed?: () => void }) {
  const [token, setToken] = useState(fragmentToken);
  const [attempt, setAttempt] = useState(0);
  const [done, setDone] = useState<string | null>(null);
  const checked = useLoad(
    async () => (token ? (await app<{ data: LinkCheck }>('POST', '/links/check', { kind: kind === 'setup' ? 'setup' : 'invitation', token })).data : null),
    [token, kind, attempt],
  );
  // Another link opened in this tab changes only the fragment: no new page load.
  useEffect(() => {
    const follow = () => {
      setToken(fragmentToken());
      setDone(null);
      // Checked again, even the same link: it may have been used since.
      setAttempt((n) => n + 1);
    };
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);

  const title = kind === 'setup' ? 'Choose your password' : 'Accept the invitation';
  // A check under way shows nothing of the previous link's answer.
  const check = checked.loading ? null : checked.data;
  const refusal = done ? null : !token ? 'incomplete' : checked.error && !checked.loading ? 'error' : !check ? 'checking' : check.status !== 'valid' ? check.status : null;
  if (done) {
    return (
      <section class="narrow">
        <PageTitle>{kind === 'setup' ? 'Password set' : 'Invitation accepted'}</PageTitle>
        <Notice>You can now sign in as {done}.</Notice>
        <SignInLink />
      </section>
    );
  }
  if (refusal || !check) return <LinkNotUsable title={title} state={refusal ?? 'checking'} error={checked.error} onRetry={() => setAttempt((n) => n + 1)} />;
  return (
    <LinkForm
      key={`${token}:${attempt}`}
      kind={kind}
      title={title}
      token={token!}
      check={check}
      onUsed={(email) => {
        setDone(email);
        onUsed?.();
      }}
    />
  );
}

/** A link that shows no form: incomplete, being checked, not checked (an error) or refused. */
function LinkNotUsable({ title, state, error, onRetry }: { title: string; state: 'incomplete' | 'error' | 'checking' | Exclude<LinkCheck['status'], 'valid'>; error: unknown; onRetry: () => void }) {
  if (state === 'incomplete' || state === 'error' || state === 'checking') {
    return (
      <section class="narrow">
        <PageTitle>{title}</PageTitle>
        {state === 'incomplete' ? (
          <p class="alert" role="alert">
            This link is incomplete: open the whole link you were given.
          </p>
        ) : state === 'error' ? (
          <>
            <Alert error={error} />
            <button type="button" onClick={onRetry}>
              Check the link again
            </button>
          </>
        ) : (
          <p role="status">Checking the link…</p>
        )}
      </section>
    );
  }
  const refusal = LINK_REFUSALS[state];
  return (
    <section class="narrow" data-link-status={state}>
      <PageTitle>{refusal.title}</PageTitle>
      <p>{refusal.text}</p>
      <SignInLink />
    </section>
  );
}

/** The form of a link that works: a new password typed twice, or an existing account's password. */
function LinkForm(props: { kind: 'setup' | 'invite'; title: string; token: string; check: LinkCheck; onUsed: (email: string) => void }) {
  const { kind, check } = props;
  const twice = useTwice();
  const [current, setCurrent] = useState('');
  const action = useAction();
  const existingAccount = kind === 'invite' && check.existing_account === true;
  async function submit(event: Event) {
    event.preventDefault();
    if (!existingAccount && !twice.ready()) return;
    const path = kind === 'setup' ? '/password-setup' : '/invitations/accept';
    const password = existingAccount ? current : twice.password;
    const answer = await action.run(() => app<{ data: { email: string } }>('POST', path, { token: props.token, password }));
    if (!answer) return;
    // The link is used: take it out of the address bar and history.
    history.replaceState(null, '', location.pathname);
    props.onUsed(answer.data.email);
  }
  const error = action.error;
  const passwordError = fieldMessage(error, 'password');
  return (
    <section class="narrow">
      <PageTitle>{props.title}</PageTitle>
      <form onSubmit={submit}>
        {existingAccount ? (
          <>
            <p class="hint">You already have an account as {check.email}: enter its password to accept.</p>
            <label for="password">Password</label>
            <input
              id="password"
              type="password"
              autoComplete="current-password"
              required
              maxLength={200}
              aria-describedby="password-error"
              value={current}
              onInput={(e) => setCurrent(e.currentTarget.value)}
            />
            <FieldError id="password-error" message={passwordError} />
          </>
        ) : (
          <>
            <p class="hint">
              {kind === 'setup' ? `For ${check.email}.` : `${check.email} is invited. Choose a password for the account.`} The link works until{' '}
              {formatTime(check.expires_at)}.
            </p>
            {twice.fields(passwordError)}
          </>
        )}
        <Alert error={besidesFields(error, 'password')} />
        <button type="submit" class="primary" disabled={action.busy}>
          {kind === 'setup' ? 'Set password' : 'Accept'}
        </button>
      </form>
    </section>
  );
}

export function ChangePassword() {
  const [current, setCurrent] = useState('');
  const twice = useTwice();
  const action = useAction();
  const [done, setDone] = useState(false);
  async function submit(event: Event) {
    event.preventDefault();
    setDone(false);
    if (!twice.ready()) return;
    if (!(await action.run(() => app('POST', '/password', { current_password: current, new_password: twice.password }).then(() => true)))) return;
    setCurrent('');
    twice.reset();
    setDone(true);
  }
  const error = action.error;
  return (
    <section class="narrow">
      <PageTitle>Change password</PageTitle>
      <form onSubmit={submit}>
        <label for="current-password">Current password</label>
        <input
          id="current-password"
          type="password"
          autoComplete="current-password"
          required
          aria-describedby="current-password-error"
          value={current}
          onInput={(e) => setCurrent(e.currentTarget.value)}
        />
        <FieldError id="current-password-error" message={fieldMessage(error, 'current_password')} />
        {twice.fields(fieldMessage(error, 'new_password'))}
        <Alert error={besidesFields(error, 'current_password', 'new_password')} />
        {done && <Notice>Password changed. Your other sessions have been signed out.</Notice>}
        <button type="submit" class="primary">
          Change password
        </button>
      </form>
    </section>
  );
}
