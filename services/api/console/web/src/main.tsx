import { render, type VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiFailure, app, forgetSessionToken, rememberCsrf, type Me } from './api.js';
import { interceptLinks, navigate, usePath } from './router.js';
import { isConsolePage } from './paths.js';
import { Alert, PageTitle } from './ui.js';
import { ChangePassword, LinkPage, SignIn } from './pages/account.js';
import { KeysPage } from './pages/keys.js';
import { MembersPage } from './pages/members.js';
import { AssetPage, LocationsPage, ReportPage } from './pages/tracking.js';
import './style.css';

/** The console's shell: who is signed in, the organization switcher, the navigation, the page. */

/** Pages anyone may open, signed in or not. */
const PUBLIC_PAGES = new Set(['/sign-in', '/setup', '/invite']);

function App() {
  const path = usePath();
  // undefined: not asked yet; null: not signed in.
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);

  function signedIn(next: Me | null) {
    rememberCsrf(next?.csrf_token ?? null);
    forgetSessionToken();
    setMe(next);
  }

  function askWhoIsSignedIn() {
    app<{ data: Me }>('GET', '/me').then(
      ({ data }) => signedIn(data),
      (failure) => (failure instanceof ApiFailure && failure.status === 401 ? signedIn(null) : setError(failure)),
    );
  }
  useEffect(askWhoIsSignedIn, []);

  useEffect(() => {
    if (me === null && !PUBLIC_PAGES.has(path) && isConsolePage(path)) navigate('/sign-in', { replace: true });
    if (me && (path === '/sign-in' || path === '/')) navigate('/assets', { replace: true });
  }, [me, path]);

  if (path === '/setup' || path === '/invite') {
    return (
      <Shell me={null} path={path} onSignedOut={() => signedIn(null)}>
        {/* A used setup link ends every session of its user, perhaps this browser's own. */}
        <LinkPage kind={path === '/setup' ? 'setup' : 'invite'} onUsed={askWhoIsSignedIn} />
      </Shell>
    );
  }
  if (me === undefined) {
    return (
      <Shell me={null} path={path} onSignedOut={() => signedIn(null)}>
        {error ? <Alert error={error} /> : <p role="status">Loading…</p>}
      </Shell>
    );
  }
  if (me === null) {
    return (
      <Shell me={null} path={path} onSignedOut={() => signedIn(null)}>
        {isConsolePage(path) ? <SignIn onSignedIn={(next) => signedIn(next)} /> : <NotFound signedIn={false} />}
      </Shell>
    );
  }
  return (
    <Shell me={me} path={path} onSignedOut={() => signedIn(null)} onSwitched={(next) => signedIn(next)}>
      <Page path={path} me={me} />
    </Shell>
  );
}

function Page({ path, me }: { path: string; me: Me }) {
  const admin = me.current_org?.role === 'admin';
  // Operators and admins keep master data; a viewer sees no control that writes (docs/console.md).
  const operator = admin || me.current_org?.role === 'operator';
  if (!me.current_org) {
    return (
      <section>
        <PageTitle>No organization</PageTitle>
        <p>You belong to no organization yet. Ask an administrator to invite you.</p>
      </section>
    );
  }
  const asset = /^\/assets\/(\d+)$/.exec(path);
  if (asset) return <AssetPage key={`${me.current_org.id}:${asset[1]}`} assetId={Number(asset[1])} operator={operator} />;
  // Remounted on an organization switch: nothing of the previous one stays on screen.
  const org = me.current_org.id;
  const count = /^\/counts\/(\d+)$/.exec(path);
  if (count) return <CountsPages key={`${org}:${count[1]}`} page={(m) => <m.CountPage countId={Number(count[1])} operator={operator} />} />;
  switch (path) {
    case '/assets':
      return <ReportPage key={org} operator={operator} />;
    case '/locations':
      return <LocationsPage key={org} operator={operator} />;
    case '/password':
      return <ChangePassword />;
    case '/keys':
      return admin ? <KeysPage key={org} /> : <AdminOnly />;
    case '/members':
      return admin ? <MembersPage key={org} me={me} /> : <AdminOnly />;
    case '/import':
      return operator ? <ImportPages key={org} page={(m) => <m.ImportPage />} /> : <OperatorsOnly />;
    case '/readers':
      return admin ? <OperatorPage key={org} page={(m) => <m.ReadersPage />} /> : <AdminOnly />;
    case '/unknown-reads':
      return <OperatorPage key={org} page={(m) => <m.UnknownReadsPage admin={admin} operator={operator} />} />;
    case '/live':
      return <OperatorPage key={org} page={(m) => <m.LivePage />} />;
    case '/webhooks':
      return admin ? <WebhooksPage key={org} page={(m) => <m.WebhooksPage />} /> : <AdminOnly />;
    case '/audit':
      return admin ? <AuditPage key={org} page={(m) => <m.AuditPage />} /> : <AdminOnly />;
    case '/counts':
      return <CountsPages key={org} page={(m) => <m.CountsPage operator={operator} />} />;
    case '/scan':
      return operator ? <OperatorPage key={org} page={(m) => <m.ScanPage orgId={org} />} /> : <OperatorsOnly />;
    case '/alerts':
      return <AlertsPage key={org} page={(m) => <m.AlertsPage operator={operator} admin={admin} />} />;
    default:
      return <NotFound signedIn />;
  }
}

/** Any path that is not one of the console's pages (the server answered it 404). */
function NotFound({ signedIn }: { signedIn: boolean }) {
  return (
    <section>
      <PageTitle>Not found</PageTitle>
      <p>
        There is no page here. {signedIn ? <a href="/assets">Where things are</a> : <a href="/sign-in">Sign in</a>}
      </p>
    </section>
  );
}

/**
 * A page whose module is fetched the first time one of its pages opens (a chunk of its own), so
 * the first page's script stays the size of the pages most people use.
 */
function lazyPages<M>(load: () => Promise<M>) {
  let cached: M | null = null;
  return function LazyPage({ page }: { page: (module: M) => VNode }) {
    const [loaded, setLoaded] = useState(cached);
    const [error, setError] = useState<unknown>(null);
    useEffect(() => {
      if (loaded) return;
      load().then((module) => {
        cached = module;
        setLoaded(() => module);
      }, setError);
    }, []);
    if (loaded) return page(loaded);
    return error ? <Alert error={error} /> : <p role="status">Loading…</p>;
  };
}

/** The operator pages (Readers, Unknown reads, Live reads). */
const OperatorPage = lazyPages(() => import('./pages/operator.js'));
/** The Webhooks page (admins). */
const WebhooksPage = lazyPages(() => import('./pages/webhooks.js'));
/** The Audit log page (admins). */
const AuditPage = lazyPages(() => import('./pages/audit.js'));
/** The Alerts inbox (every member; operators and admins acknowledge). */
const AlertsPage = lazyPages(() => import('./pages/alerts.js'));
/** The Counts pages (every member; operators and admins start and close). */
const CountsPages = lazyPages(() => import('./pages/counts.js'));
/** The Import page (operators and admins). */
const ImportPages = lazyPages(() => import('./pages/import.js'));

/** A page that writes master data, which a viewer does not see (docs/console.md). */
function OperatorsOnly() {
  return (
    <section>
      <PageTitle>Operators and administrators only</PageTitle>
      <p>This page changes the organization's assets and locations; your role only reads them.</p>
    </section>
  );
}

function AdminOnly() {
  return (
    <section>
      <PageTitle>Administrators only</PageTitle>
      <p>This page is for the organization's administrators.</p>
    </section>
  );
}

function Shell(props: { me: Me | null; path: string; children: preact.ComponentChildren; onSignedOut: () => void; onSwitched?: (me: Me) => void }) {
  const { me, path } = props;
  const [error, setError] = useState<unknown>(null);
  const admin = me?.current_org?.role === 'admin';
  const operator = admin || me?.current_org?.role === 'operator';
  const links: Array<[string, string]> = me
    ? [
        ['/assets', 'Where things are'],
        ['/locations', 'Locations'],
        ...(operator ? ([['/import', 'Import']] as Array<[string, string]>) : []),
        ...(operator ? ([['/scan', 'Scan']] as Array<[string, string]>) : []),
        ['/counts', 'Counts'],
        ['/alerts', 'Alerts'],
        ['/live', 'Live reads'],
        ['/unknown-reads', 'Unknown reads'],
        ...(admin
          ? ([
              ['/readers', 'Readers'],
              ['/webhooks', 'Webhooks'],
              ['/keys', 'API keys'],
              ['/members', 'Members'],
              ['/audit', 'Audit log'],
            ] as Array<[string, string]>)
          : []),
        ['/password', 'Password'],
      ]
    : [];
  async function signOut() {
    try {
      await app('POST', '/sign-out');
      props.onSignedOut();
      navigate('/sign-in');
    } catch (failure) {
      setError(failure);
    }
  }
  async function switchOrg(orgId: number) {
    try {
      const { data } = await app<{ data: Me }>('POST', '/session/org', { org_id: orgId });
      props.onSwitched?.(data);
    } catch (failure) {
      setError(failure);
    }
  }
  const current = (to: string) => path === to || ((to === '/assets' || to === '/counts') && path.startsWith(`${to}/`));
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Tracking console</span>
        {me && (
          <div class="account">
            {me.memberships.length > 1 ? (
              <>
                <label for="org-switch" class="visually-hidden">
                  Organization
                </label>
                <select id="org-switch" value={me.current_org?.id ?? ''} onChange={(e) => void switchOrg(Number(e.currentTarget.value))}>
                  {me.memberships.map((m) => (
                    <option key={m.org_id} value={m.org_id}>
                      {m.org_name} ({m.role})
                    </option>
                  ))}
                </select>
              </>
            ) : (
              <span class="org">{me.current_org ? `${me.current_org.name} (${me.current_org.role})` : 'No organization'}</span>
            )}
            <span class="who">{me.user.email}</span>
            <button type="button" onClick={() => void signOut()}>
              Sign out
            </button>
          </div>
        )}
      </header>
      {links.length > 0 && (
        <nav class="main-nav" aria-label="Main">
          <ul>
            {links.map(([to, label]) => (
              <li key={to}>
                <a href={to} aria-current={current(to) ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      )}
      <main id="main">
        <Alert error={error} />
        {props.children}
      </main>
    </>
  );
}

interceptLinks();
render(<App />, document.getElementById('app')!);
