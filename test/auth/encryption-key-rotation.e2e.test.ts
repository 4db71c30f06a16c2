import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseKeyEncryptionKey } from '../../shared/auth/key-encryption.js';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';

/**
 * `keys rotate-encryption-key` with the key in the environment (docs/operations.md, "Secrets: the signing keys and their encryption"): the CLI
 * re-encrypts every signing key under NEW_SIGNING_KEY_ENCRYPTION_KEY; afterwards only the new key
 * (alone, or first in a list with the old one) opens them, while every token keeps working.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const SLOW = 120_000;

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('kek_rotation_cli');
});

afterAll(async () => {
  await svc?.stop();
});

function cli(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      TSX,
      ['services/cli/main.ts', ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: svc.db.url, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1', ...env }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe('keys rotate-encryption-key', () => {
  it('moves every signing key to the new key-encryption key; the old one alone then stops with one line', async () => {
    const org = await createOrg(svc.service.ctx, 'KEK rotation');
    const before = await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: ['assets:read'] });
    const oldKey = TEST_SIGNING_KEY_ENCRYPTION_KEY;
    const newKey = randomBytes(32).toString('base64');

    const withoutNew = await cli({ SIGNING_KEY_ENCRYPTION_KEY: oldKey }, 'keys', 'rotate-encryption-key', '--json');
    expect(withoutNew.code).toBe(2);
    expect(withoutNew.stdout).toBe('');
    expect(withoutNew.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(withoutNew.stderr).toContain('NEW_SIGNING_KEY_ENCRYPTION_KEY');

    const rotated = await cli({ SIGNING_KEY_ENCRYPTION_KEY: oldKey, NEW_SIGNING_KEY_ENCRYPTION_KEY: newKey }, 'keys', 'rotate-encryption-key', '--json');
    expect(rotated.stderr).toBe('');
    expect(rotated.code).toBe(0);
    expect(JSON.parse(rotated.stdout)).toEqual({
      signing_keys: 1,
      webhook_secrets: 0,
      encryption_key_id: parseKeyEncryptionKey(newKey).id,
      previous_encryption_key_ids: [parseKeyEncryptionKey(oldKey).id],
      key_file: null,
    });
    expect(rotated.stdout).not.toContain(newKey);

    const mint = ['keys', 'mint', '--org', String(org.id), '--name', 'after', '--scopes', 'assets:read', '--json'];
    const refused = await cli({ SIGNING_KEY_ENCRYPTION_KEY: oldKey }, ...mint);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/^error: Invalid configuration: SIGNING_KEY_ENCRYPTION_KEY: /);
    expect(refused.stderr).not.toContain(oldKey);

    const runs = await Promise.all([newKey, `${newKey},${oldKey}`].map((keys) => cli({ SIGNING_KEY_ENCRYPTION_KEY: keys }, ...mint)));
    for (const minted of runs) {
      expect(minted.stderr).toBe('');
      expect(minted.code).toBe(0);
      const { token } = JSON.parse(minted.stdout) as { token: string };
      expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(token) })).status).toBe(200);
    }
    // Tokens minted before the rotation are untouched: verification uses the public keys.
    expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(before.token) })).status).toBe(200);
  }, SLOW);
});
