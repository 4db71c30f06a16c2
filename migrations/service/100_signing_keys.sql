-- Token signing keys: secrets, so not events and not part of any read model. Exactly one key is
-- active (signs new tokens); retired keys still verify the tokens they signed until those are
-- revoked. The partial unique index makes concurrent first starts agree on one active key.
CREATE TABLE signing_keys (
  kid text PRIMARY KEY,
  algorithm text NOT NULL,
  private_jwk jsonb NOT NULL,
  public_jwk jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  retired_at timestamptz
);

CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys ((true)) WHERE retired_at IS NULL;

-- When each API key was last used. Operational metadata written by the api process in batches,
-- not an event: recording every request in the log would make reads write to it. Kept out of the
-- read model so that a rebuild or replay neither needs nor loses it.
CREATE TABLE api_key_usage (
  key_id text PRIMARY KEY,
  last_used_at timestamptz NOT NULL
);
