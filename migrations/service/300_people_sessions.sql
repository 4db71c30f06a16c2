-- The web application's operational state (docs/design.md, "People and sessions"): not events,
-- and not part of any read model, so a rebuild or a replay neither needs nor loses it.

-- Sessions behind the cookie. Only the SHA-256 of the cookie's value is kept; the CSRF token is
-- the page's to send back in a header.
CREATE TABLE app_sessions (
  id_sha256 text PRIMARY KEY,
  user_id text NOT NULL,
  org_id integer,
  csrf_token text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX app_sessions_by_user ON app_sessions (user_id);
CREATE INDEX app_sessions_by_expiry ON app_sessions (expires_at);

-- Failed sign-ins per email address (known or not, so the answers tell nothing about who has an
-- account): counted before the password is checked, so parallel attempts are counted too.
CREATE TABLE sign_in_attempts (
  email text PRIMARY KEY,
  failures integer NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  locked_at timestamptz
);

-- When each user last signed in.
CREATE TABLE user_sign_ins (
  user_id text PRIMARY KEY,
  last_sign_in_at timestamptz NOT NULL
);
