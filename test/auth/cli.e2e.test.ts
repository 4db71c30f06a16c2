import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';

/**
 * The auth commands of the CLI, run as child processes against the database of a running
 * service (so their read-your-writes waits on that service's projector, as with `npm start`).
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('auth_cli');
});

afterAll(async () => {
  await svc?.stop();
});

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(...args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      TSX,
      ['services/cli/main.ts', ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** Exactly one JSON document on stdout, nothing on stderr. */
async function cliJson(...args: string[]): Promise<unknown> {
  const run = await cli(...args, '--json');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout);
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Each CLI run is a process that loads the whole service (about a second of CPU), hence the timeouts. */
const SLOW = 120_000;

describe.concurrent('auth CLI --json', () => {
  it('orgs create and orgs list', async () => {
    const org = (await cliJson('orgs', 'create', '--name', 'Acme CLI')) as { id: number; name: string };
    expect(org).toEqual({ id: expect.any(Number), name: 'Acme CLI' });
    const orgs = (await cliJson('orgs', 'list')) as unknown[];
    expect(orgs).toContainEqual({ id: org.id, name: 'Acme CLI', created_at: expect.stringMatching(ISO) });
  }, SLOW);

  it('keys mint, list and revoke; the minted token works until revoked', async () => {
    const org = await createOrg(svc.service.ctx, 'Keys CLI');
    const minted = (await cliJson(
      'keys', 'mint', '--org', String(org.id), '--name', 'warehouse', '--scopes', 'assets:read,locations:read', '--expires-at', '2099-01-01T00:00:00Z',
    )) as { id: string; token: string };
    expect(minted).toEqual({
      id: expect.any(String),
      token: expect.stringMatching(JWT),
      name: 'warehouse',
      scopes: ['assets:read', 'locations:read'],
      expires_at: '2099-01-01T00:00:00.000Z',
    });
    const me = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(minted.token) });
    expect(me.status).toBe(200);
    expect(await me.json()).toEqual({ data: { id: org.id, name: 'Keys CLI', scopes: ['assets:read', 'locations:read'], api_key_id: minted.id } });

    const listRun = await cli('keys', 'list', '--org', String(org.id), '--json');
    expect(listRun.code).toBe(0);
    expect(listRun.stdout).not.toContain(minted.token.split('.')[1]!);
    expect(listRun.stdout).not.toContain(minted.token.split('.')[2]!);
    const listed = JSON.parse(listRun.stdout) as Array<Record<string, unknown>>;
    expect(listed).toEqual([
      {
        id: minted.id,
        name: 'warehouse',
        prefix: expect.any(String),
        scopes: ['assets:read', 'locations:read'],
        created_at: expect.stringMatching(ISO),
        last_used_at: expect.toSatisfy((v: unknown) => v === null || (typeof v === 'string' && ISO.test(v))),
        expires_at: '2099-01-01T00:00:00.000Z',
        revoked_at: null,
      },
    ]);
    expect(minted.token.includes(listed[0]!.prefix as string)).toBe(true);

    const revoked = (await cliJson('keys', 'revoke', minted.id)) as { id: string; revoked_at: string };
    expect(revoked).toEqual({ id: minted.id, revoked_at: expect.stringMatching(ISO) });
    const refused = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(minted.token) });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { error: { detail: string } }).error.detail).toBe('API key has been revoked');
  }, SLOW);

  it('keys rotate-signing-key: keys minted afterwards use the new key', async () => {
    const org = await createOrg(svc.service.ctx, 'Rotation CLI');
    const rotation = (await cliJson('keys', 'rotate-signing-key')) as { kid: string; previous_kid: string };
    expect(rotation).toEqual({ kid: expect.stringMatching(/^sk_/), previous_kid: expect.stringMatching(/^sk_/), algorithm: 'EdDSA', created_at: expect.stringMatching(ISO) });
    const after = await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: ['tracking:read'] });
    expect(JSON.parse(Buffer.from(after.token.split('.')[0]!, 'base64url').toString()).kid).toBe(rotation.kid);
    expect((await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(after.token) })).status).toBe(200);
  }, SLOW);

  it('sessions mint', async () => {
    const org = await createOrg(svc.service.ctx, 'Sessions CLI');
    const session = (await cliJson('sessions', 'mint', '--user', 'ada@example.com', '--org', String(org.id), '--ttl-seconds', '120')) as {
      token: string;
      expires_at: string;
    };
    expect(session).toEqual({ token: expect.stringMatching(JWT), expires_at: expect.stringMatching(ISO) });
    const claims = JSON.parse(Buffer.from(session.token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    expect(claims).toMatchObject({ sub: 'ada@example.com', org_id: org.id, scopes: ['keys:admin'] });
    expect((claims.exp as number) - (claims.iat as number)).toBe(120);
  }, SLOW);

  it('refusals exit non-zero with one line on stderr and nothing on stdout', async () => {
    const org = await createOrg(svc.service.ctx, 'Refusals');
    const cases: Array<[string[], string]> = [
      [['keys', 'mint', '--org', String(org.id), '--name', 'admin', '--scopes', 'keys:admin'], 'keys:admin is reserved'],
      [['keys', 'mint', '--org', String(org.id), '--name', 'odd', '--scopes', 'assets:read,assets:admin'], 'unknown scope: assets:admin'],
      [['keys', 'mint', '--org', '424242', '--name', 'orphan', '--scopes', 'assets:read'], 'organization 424242 does not exist'],
      [['keys', 'revoke', 'ak_unknown'], 'API key ak_unknown does not exist'],
      [['keys', 'list', '--org', 'acme'], '--org must be an integer between 1 and 2147483647'],
    ];
    const runs = await Promise.all(cases.map(([args]) => cli(...args, '--json')));
    runs.forEach((run, i) => {
      const detail = cases[i]![1];
      expect(run.code, detail).not.toBe(0);
      expect(run.stdout, detail).toBe('');
      expect(run.stderr.trimEnd().split('\n'), detail).toHaveLength(1);
      expect(run.stderr, detail).toContain(detail);
    });
  }, SLOW);
});
