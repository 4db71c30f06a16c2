-- Session tokens belong to an app session (docs/web-app.md, "Session tokens"): a token names its
-- session by `id` and the session's `token_generation` when it was minted, so ending the session
-- (sign-out, a lock) or moving the generation on (a password change) ends its tokens on every
-- api process. The CLI's `sessions mint` opens a session of its own (`kind` 'cli', no cookie);
-- `email` is the person's address, also for a CLI session of an email that is no user
-- (`user_id` null).
ALTER TABLE app_sessions ADD COLUMN id text;
UPDATE app_sessions SET id = 'ses_' || left(id_sha256, 26);
ALTER TABLE app_sessions ALTER COLUMN id SET NOT NULL;
ALTER TABLE app_sessions ADD CONSTRAINT app_sessions_id UNIQUE (id);
ALTER TABLE app_sessions ADD COLUMN token_generation integer NOT NULL DEFAULT 0;
ALTER TABLE app_sessions ADD COLUMN kind text NOT NULL DEFAULT 'cookie' CHECK (kind IN ('cookie', 'cli'));
ALTER TABLE app_sessions ADD COLUMN email text;
ALTER TABLE app_sessions ALTER COLUMN user_id DROP NOT NULL;
-- A lock ends the sessions of an address.
CREATE INDEX app_sessions_by_email ON app_sessions (email);
