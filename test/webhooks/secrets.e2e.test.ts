import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseKeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import { newSecret } from '../../services/webhooks/endpoints.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { eventually } from '../support/kafka.js';
import { scanner } from '../support/scans.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { client } from '../master-data/http.js';

/**
 * The endpoints' signing secrets at rest (docs/design.md "Webhooks"): sealed in the table (no
 * secret, current or previous, appears in it), a row stored in plain before this version sealed
 * by the next start, and `keys rotate-encryption-key` moving them with the signing keys so a
 * webhooks process holding only the new key still signs with the partner's secrets. The api,
 * ingest and projector run in this process; the webhooks role in a child process with the key it
 * is given, as a deployment runs it.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

let svc: TestService;
let receiver: WebhookReceiver;
let child: ChildProcess | null = null;

beforeAll(async () => {
  svc = await startTestService('webhook_secrets', { ROLES: 'api,ingest,projector' });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  child?.kill('SIGKILL');
  await svc?.stop();
  await receiver?.close();
});

function baseEnv(key: string): NodeJS.ProcessEnv {
  return { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: key, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' };
}

async function startWebhooks(key: string): Promise<ChildProcess> {
  const env = { ...baseEnv(key), PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', ROLES: 'webhooks' };
  const started = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    started.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('tracking service ready')) resolve();
    });
    started.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    started.once('exit', (code) => reject(new Error(`the service exited early (${code}): ${out}`)));
  });
  return started;
}

async function stop(process: ChildProcess): Promise<void> {
  process.kill('SIGTERM');
  await new Promise((r) => process.once('exit', r));
}

function cli(env: NodeJS.ProcessEnv, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(TSX, ['services/cli/main.ts', ...args], { cwd: ROOT, env, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** Every column of the org's endpoints as text (bytea as hex): what a copy of the table shows. */
async function tableText(orgId: number): Promise<string> {
  const { rows } = await svc.service.ctx.pool.query<{ t: string }>(`SELECT to_jsonb(e)::text AS t FROM service.webhook_endpoints e WHERE org_id = $1`, [orgId]);
  return rows.map((r) => r.t).join('\n');
}

function expectAbsent(text: string, secrets: string[]): void {
  for (const secret of secrets) {
    expect(text).not.toContain(secret.slice(6));
    // Nor its bytes, hex-encoded as a bytea column would show them.
    expect(text).not.toContain(Buffer.from(secret.slice(6), 'base64').toString('hex'));
    expect(text).not.toContain(Buffer.from(secret, 'utf8').toString('hex'));
  }
}

describe('webhook secrets encrypted at rest', () => {
  it('no secret in the table; a plain row sealed at start; rotate-encryption-key keeps every webhook verifying', { timeout: 180_000 }, async () => {
    const ctx = svc.service.ctx;
    const orgId = (await createOrg(ctx, 'secrets')).id;
    const api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['assets:write', 'locations:write', 'webhooks:write'] })).token);
    const dock = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Dock', external_key: 'SEC-DOCK' } })).body.data.id;
    await api('POST', '/assets', { body: { name: 'pallet', tags: [{ tag_type: 'barcode', value: 'SEC-1' }] } });

    const created = await api<{ data: { id: number; secret: string } }>('POST', '/webhook-endpoints', { body: { url: receiver.url('/sealed'), event_types: ['asset.first_seen'] } });
    expect(created.status, created.text).toBe(201);
    const rotated = await api<{ data: { secret: string } }>('POST', `/webhook-endpoints/${created.body.data.id}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(200);
    const [oldSecret, newSecretOfSealed] = [created.body.data.secret, rotated.body.data.secret];
    const firstKey = parseKeyEncryptionKey(TEST_SIGNING_KEY_ENCRYPTION_KEY).id;
    const stored = await ctx.pool.query('SELECT secret, previous_secret, secret_encrypted, previous_secret_encrypted, encryption_key_id FROM service.webhook_endpoints WHERE id = $1', [created.body.data.id]);
    expect(stored.rows[0]).toMatchObject({ secret: null, previous_secret: null, secret_encrypted: expect.any(Buffer), previous_secret_encrypted: expect.any(Buffer), encryption_key_id: firstKey });
    expectAbsent(await tableText(orgId), [oldSecret, newSecretOfSealed]);

    // An endpoint as a version before encryption at rest stored it: the secret in plain.
    const plainSecret = newSecret();
    const plainPrevious = newSecret();
    await ctx.pool.query(
      `INSERT INTO service.webhook_endpoints (org_id, url, event_types, not_seen_after_seconds, secret, previous_secret, previous_until)
       VALUES ($1, $2, ARRAY['asset.first_seen'], 3600, $3, $4, now() + interval '1 hour')`,
      [orgId, receiver.url('/plain'), plainSecret, plainPrevious],
    );
    expect(await tableText(orgId)).toContain(plainSecret.slice(6));
    // The next start (here a webhooks process) seals it.
    child = await startWebhooks(TEST_SIGNING_KEY_ENCRYPTION_KEY);
    const afterStart = await ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM service.webhook_endpoints WHERE org_id = $1 AND secret IS NULL AND encryption_key_id = $2`, [orgId, firstKey]);
    expect(afterStart.rows[0]!.n).toBe(2);
    expectAbsent(await tableText(orgId), [oldSecret, newSecretOfSealed, plainSecret, plainPrevious]);
    await stop(child);
    child = null;

    // Minted now: this process still holds only the key being replaced.
    const scans = await scanner(svc, orgId);
    const newKey = randomBytes(32).toString('base64');
    const rotation = await cli({ ...baseEnv(TEST_SIGNING_KEY_ENCRYPTION_KEY), NEW_SIGNING_KEY_ENCRYPTION_KEY: newKey }, 'keys', 'rotate-encryption-key', '--json');
    expect(rotation.stderr).toBe('');
    expect(rotation.code).toBe(0);
    const totalEndpoints = (await ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM service.webhook_endpoints')).rows[0]!.n;
    expect(JSON.parse(rotation.stdout)).toMatchObject({ webhook_secrets: totalEndpoints, encryption_key_id: parseKeyEncryptionKey(newKey).id, previous_encryption_key_ids: [firstKey] });
    const keyIds = await ctx.pool.query<{ id: string }>('SELECT DISTINCT encryption_key_id AS id FROM service.webhook_endpoints');
    expect(keyIds.rows.map((r) => r.id)).toEqual([parseKeyEncryptionKey(newKey).id]);
    expectAbsent(await tableText(orgId), [oldSecret, newSecretOfSealed, plainSecret, plainPrevious]);

    // Only the new key now: both endpoints' webhooks verify with the secrets the partners hold.
    child = await startWebhooks(newKey);
    await scans.scan({ id: dock }, [{ tag_type: 'barcode', value: 'SEC-1', observed_at: new Date().toISOString() }]);
    await eventually(async () => {
      expect(receiver.to('/sealed').length).toBeGreaterThan(0);
      expect(receiver.to('/plain').length).toBeGreaterThan(0);
    }, 30_000, 50);
    const [sealed] = receiver.to('/sealed');
    const [plain] = receiver.to('/plain');
    for (const secret of [newSecretOfSealed, oldSecret]) expect(new Webhook(secret).verify(sealed!.body, sealed!.headers as Record<string, string>)).toMatchObject({ type: 'asset.first_seen' });
    for (const secret of [plainSecret, plainPrevious]) expect(new Webhook(secret).verify(plain!.body, plain!.headers as Record<string, string>)).toMatchObject({ type: 'asset.first_seen' });
    // A secret the endpoint never had does not verify: the check above can fail.
    expect(() => new Webhook(newSecret()).verify(sealed!.body, sealed!.headers as Record<string, string>)).toThrow();
    await stop(child);
    child = null;
  });
});
