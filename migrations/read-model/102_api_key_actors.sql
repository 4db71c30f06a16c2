-- Who minted and who revoked each key (ApiKeyMinted.minted_by, ApiKeyRevoked.revoked_by): a user
-- of the web application ({"kind":"user","user_id","email"}) or the CLI ({"kind":"cli"}); null
-- for keys minted before the events recorded it.
ALTER TABLE api_keys ADD COLUMN minted_by jsonb, ADD COLUMN revoked_by jsonb;
