-- Webhook signing secrets encrypted at rest (docs/design.md "Webhooks"), with the key ring of the
-- token signing keys (101_signing_keys_encrypted.sql): `secret_encrypted` and
-- `previous_secret_encrypted` are the whsec_ values sealed with AES-256-GCM under the
-- key-encryption key named by `encryption_key_id`, bound to the endpoint's id. `secret` and
-- `previous_secret` remain only for rows written before encryption: the first start that holds a
-- key-encryption key seals them and clears them (services/webhooks/secrets.ts), as it does the
-- signing keys, so every row has exactly one form of its secrets.
ALTER TABLE webhook_endpoints ALTER COLUMN secret DROP NOT NULL;
ALTER TABLE webhook_endpoints ADD COLUMN secret_encrypted bytea;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_encrypted bytea;
ALTER TABLE webhook_endpoints ADD COLUMN encryption_key_id text;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_secret_once
  CHECK (num_nonnulls(secret, secret_encrypted) = 1
         AND (secret_encrypted IS NULL) = (encryption_key_id IS NULL)
         AND (previous_secret IS NULL OR secret IS NOT NULL)
         AND (previous_secret_encrypted IS NULL OR secret_encrypted IS NOT NULL));
