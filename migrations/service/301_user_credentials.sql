-- Password hashes, out of the event log (docs/design.md, "Secrets are not events"): a
-- `PasswordSet` event names its credential by id, and a user's older credentials are deleted
-- once a new password is set, so a replaced hash is really gone. Not an event, not part of any
-- read model: a rebuild or a replay neither needs nor changes it. A row whose append failed
-- (never named by an event) goes with the user's next password.
CREATE TABLE user_credentials (
  credential_id text PRIMARY KEY,
  user_id text NOT NULL,
  password_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_credentials_by_user ON user_credentials (user_id);
