-- People of the web application (projection `people`, projections/people/projection.ts). No
-- password hash is projected: sign-in reads it from the user's stream.
CREATE TABLE users (
  id text PRIMARY KEY,
  email text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  password_set_at timestamptz
);

CREATE TABLE memberships (
  user_id text NOT NULL,
  org_id integer NOT NULL,
  role text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (user_id, org_id)
);
-- `users list --org` and the members endpoint: one org's members, oldest first.
CREATE INDEX memberships_by_org ON memberships (org_id, created_at, user_id);

CREATE TABLE invitations (
  id text PRIMARY KEY,
  org_id integer NOT NULL,
  email text NOT NULL,
  role text NOT NULL,
  issued_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  issued_by jsonb NOT NULL,
  accepted_at timestamptz,
  accepted_by text
);
CREATE INDEX invitations_by_org ON invitations (org_id, issued_at, id);
