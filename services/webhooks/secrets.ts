import type pg from 'pg';
import { inTransaction } from '../../shared/db/pool.js';
import { KEY_ENCRYPTION_VARIABLE, KeyNotHeldError, type KeyEncryptionKey, type KeyRing, type SealedSubject } from '../../shared/auth/key-encryption.js';
import { sealingWithKeyRing, type SealedSecrets } from '../../shared/auth/signing-keys.js';
import { ConfigError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';

/**
 * The endpoints' signing secrets at rest (docs/design.md "Webhooks"): sealed with the key ring of
 * the token signing keys, bound to the endpoint's id (a sealed secret copied onto another endpoint
 * does not open). The current and the previous secret of a row are sealed under one key, named
 * by `encryption_key_id`. `secret` and `previous_secret` in plain remain only on rows written
 * before encryption, until a start with a key seals them (`sealPlaintextWebhookSecrets`).
 */

/** What a stored row carries of its secrets. */
export interface StoredSecrets {
  id: number;
  secret: string | null;
  previous_secret: string | null;
  secret_encrypted: Buffer | null;
  previous_secret_encrypted: Buffer | null;
  encryption_key_id: string | null;
}

export const SECRET_COLUMNS = 'secret, previous_secret, secret_encrypted, previous_secret_encrypted, encryption_key_id';

export function endpointSecretSubject(endpointId: number): SealedSubject {
  return { description: `webhook endpoint ${endpointId}'s secret`, associatedData: `tracking webhook endpoint secret v1:${endpointId}` };
}

export function keyRingRequired(): ConfigError {
  return new ConfigError(
    `Invalid configuration: ${KEY_ENCRYPTION_VARIABLE}: required to create or use webhook endpoints, whose secrets are stored encrypted (32 random bytes in base64, e.g. from: openssl rand -base64 32)`,
  );
}

export interface SealedSecretPair {
  secret_encrypted: Buffer;
  previous_secret_encrypted: Buffer | null;
  encryption_key_id: string;
}

/** Seals an endpoint's secrets under `key` (the ring's current one unless given). */
export function sealSecrets(keys: KeyRing, endpointId: number, secret: string, previous: string | null, key: KeyEncryptionKey = keys.current): SealedSecretPair {
  const subject = endpointSecretSubject(endpointId);
  const seal = (text: string) => keys.sealFor(subject, Buffer.from(text, 'utf8'), key).sealed;
  return { secret_encrypted: seal(secret), previous_secret_encrypted: previous === null ? null : seal(previous), encryption_key_id: key.id };
}

/** The secrets of a row in plain. A key this process does not hold is a configuration error. */
export function openSecrets(row: StoredSecrets, keys: KeyRing | null): { secret: string; previous: string | null } {
  if (row.secret_encrypted === null || row.encryption_key_id === null) return { secret: row.secret!, previous: row.previous_secret };
  if (!keys) throw keyRingRequired();
  const subject = endpointSecretSubject(row.id);
  const keyId = row.encryption_key_id;
  const open = (sealed: Buffer) => keys.openFor(subject, { keyId, sealed }).toString('utf8');
  try {
    return { secret: open(row.secret_encrypted), previous: row.previous_secret_encrypted === null ? null : open(row.previous_secret_encrypted) };
  } catch (error) {
    if (error instanceof KeyNotHeldError) throw new ConfigError(error.message);
    throw error;
  }
}

/**
 * The delivery side's opened secrets, by endpoint: a sender opens an endpoint's sealed secrets
 * once, not once a delivery, and again when the row's sealed values change (a rotation, a new
 * encryption key, the previous secret's end). Bounded: past `max` endpoints it starts afresh.
 */
export class OpenedSecrets {
  private readonly byEndpoint = new Map<number, { row: StoredSecrets; opened: { secret: string; previous: string | null } }>();

  constructor(private readonly max = 10_000) {}

  /** `row.endpoint_id`'s secrets in plain, as openSecrets gives them. */
  open(row: Omit<StoredSecrets, 'id'> & { endpoint_id: number }, keys: KeyRing | null): { secret: string; previous: string | null } {
    const cached = this.byEndpoint.get(row.endpoint_id);
    if (cached && sameSecrets(cached.row, row)) return cached.opened;
    const stored: StoredSecrets = {
      id: row.endpoint_id,
      secret: row.secret,
      previous_secret: row.previous_secret,
      secret_encrypted: row.secret_encrypted,
      previous_secret_encrypted: row.previous_secret_encrypted,
      encryption_key_id: row.encryption_key_id,
    };
    const opened = openSecrets(stored, keys);
    if (this.byEndpoint.size >= this.max) this.byEndpoint.clear();
    this.byEndpoint.set(row.endpoint_id, { row: stored, opened });
    return opened;
  }
}

function sameBytes(a: Buffer | null, b: Buffer | null): boolean {
  return a === null || b === null ? a === b : a.equals(b);
}

function sameSecrets(a: Omit<StoredSecrets, 'id'>, b: Omit<StoredSecrets, 'id'>): boolean {
  return (
    a.encryption_key_id === b.encryption_key_id &&
    a.secret === b.secret &&
    a.previous_secret === b.previous_secret &&
    sameBytes(a.secret_encrypted, b.secret_encrypted) &&
    sameBytes(a.previous_secret_encrypted, b.previous_secret_encrypted)
  );
}

const UPDATE_SEALED = `UPDATE service.webhook_endpoints
    SET secret = NULL, previous_secret = NULL, secret_encrypted = $2, previous_secret_encrypted = $3, encryption_key_id = $4
  WHERE id = $1`;

/**
 * The secrets staged for an endpoint event not yet applied (migrations/service/403): sealed
 * again with the rest, so the projection never moves a secret under a replaced key onto a row.
 */
async function resealStaged(client: pg.ClientBase, keys: KeyRing, next: KeyEncryptionKey): Promise<number> {
  const { rows } = await client.query<{ secret_id: string; endpoint_id: number; secret_encrypted: Buffer; previous_secret_encrypted: Buffer | null; encryption_key_id: string }>(
    'SELECT secret_id, endpoint_id, secret_encrypted, previous_secret_encrypted, encryption_key_id FROM service.webhook_endpoint_secrets ORDER BY secret_id FOR UPDATE',
  );
  for (const row of rows) {
    const { secret, previous } = openSecrets({ id: row.endpoint_id, secret: null, previous_secret: null, ...row }, keys);
    const sealed = sealSecrets(keys, row.endpoint_id, secret, previous, next);
    await client.query(
      'UPDATE service.webhook_endpoint_secrets SET secret_encrypted = $2, previous_secret_encrypted = $3, encryption_key_id = $4 WHERE secret_id = $1',
      [row.secret_id, sealed.secret_encrypted, sealed.previous_secret_encrypted, sealed.encryption_key_id],
    );
  }
  return rows.length;
}

async function resealAll(client: pg.ClientBase, keys: KeyRing, next: KeyEncryptionKey, where: string): Promise<number> {
  const { rows } = await client.query<StoredSecrets>(`SELECT id, ${SECRET_COLUMNS} FROM service.webhook_endpoints ${where} ORDER BY id FOR UPDATE`);
  for (const row of rows) {
    const { secret, previous } = openSecrets(row, keys);
    const sealed = sealSecrets(keys, row.id, secret, previous, next);
    await client.query(UPDATE_SEALED, [row.id, sealed.secret_encrypted, sealed.previous_secret_encrypted, sealed.encryption_key_id]);
  }
  return rows.length;
}

/** For `keys rotate-encryption-key`: the endpoints' secrets move with the signing keys, in their transaction. */
export const webhookSecrets: SealedSecrets = {
  name: 'webhook_secrets',
  async keyIdsInUse(client) {
    const { rows } = await client.query<{ id: string }>(
      `SELECT encryption_key_id AS id FROM service.webhook_endpoints WHERE encryption_key_id IS NOT NULL
       UNION SELECT encryption_key_id FROM service.webhook_endpoint_secrets`,
    );
    return rows.map((row) => row.id);
  },
  reencrypt: async (client, keys, next) => (await resealAll(client, keys, next, '')) + (await resealStaged(client, keys, next)),
};

/**
 * The migration step of encryption at rest: seals the secrets stored in plain (endpoints created
 * before this version) under the current key. Idempotent, safe when several processes start at
 * once (row locks; the later ones find nothing left). The table is then rewritten so the plain
 * values leave its data files too.
 */
export async function sealPlaintextWebhookSecrets(pool: pg.Pool, keys: KeyRing, log?: Logger): Promise<number> {
  // Every start comes here: when nothing is plain (the usual case) it costs one read and checks
  // nothing of the key ring, which a process that never opens a secret may not hold.
  const plain = await pool.query<{ any: boolean }>('SELECT EXISTS (SELECT 1 FROM service.webhook_endpoints WHERE secret IS NOT NULL) AS any');
  if (!plain.rows[0]!.any) return 0;
  const sealed = await inTransaction(pool, async (client) => {
    await sealingWithKeyRing(client, keys);
    return resealAll(client, keys, keys.current, 'WHERE secret IS NOT NULL');
  });
  if (sealed > 0) {
    // An UPDATE leaves the old row versions, plain secrets included, in the table's files until
    // they are overwritten; VACUUM FULL writes new files without them. The table is small.
    await pool.query('VACUUM FULL service.webhook_endpoints').catch((error: unknown) => {
      log?.warn({ err: error }, 'could not rewrite service.webhook_endpoints after encrypting its secrets; run VACUUM FULL on it as its owner');
    });
    log?.info({ endpoints: sealed, encryption_key_id: keys.current.id }, 'encrypted the webhook secrets stored before encryption at rest');
  }
  return sealed;
}
