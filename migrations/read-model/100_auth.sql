-- Organizations and API keys, projected from OrgCreated / ApiKeyMinted / ApiKeyRevoked.
CREATE TABLE orgs (
  id integer PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL
);

-- Never a token: only its display prefix.
CREATE TABLE api_keys (
  id text PRIMARY KEY,
  org_id integer NOT NULL,
  name text NOT NULL,
  prefix text NOT NULL,
  scopes text[] NOT NULL,
  signing_kid text NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz,
  revoked_at timestamptz
);

-- `keys list --org`: one org's keys, oldest first.
CREATE INDEX api_keys_by_org ON api_keys (org_id, created_at, id);
