-- Private keys encrypted at rest: `private_key_encrypted` holds the private JWK sealed with
-- AES-256-GCM under a key-encryption key that is not in the database (SIGNING_KEY_ENCRYPTION_KEY,
-- or the embedded default's key file), with the kid as associated data; `encryption_key_id` names
-- that key by its fingerprint. `private_jwk` remains only for rows written before encryption: the
-- first start that holds a key-encryption key seals them and clears it (shared/auth/signing-keys.ts),
-- so every row has exactly one of the two.
ALTER TABLE signing_keys ALTER COLUMN private_jwk DROP NOT NULL;
ALTER TABLE signing_keys ADD COLUMN private_key_encrypted bytea;
ALTER TABLE signing_keys ADD COLUMN encryption_key_id text;
ALTER TABLE signing_keys ADD CONSTRAINT signing_keys_private_once
  CHECK (num_nonnulls(private_jwk, private_key_encrypted) = 1
         AND (private_key_encrypted IS NULL) = (encryption_key_id IS NULL));
