import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';

// docs/api.md "Retries and idempotency" treats 500 as a server fault; a database that cannot be reached
// is not one: the service answers 503 with Retry-After, and recovers on its own afterwards.

let svc: TestService;
let token: string;

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: inject('postgresAdminUrl') });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  svc = await startTestService('db_outage');
  const org = await createOrg(svc.service.ctx, 'Outage');
  token = (await mintApiKey(svc.service.ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] })).token;
});

afterAll(async () => {
  await admin((c) => c.query(`ALTER DATABASE ${pg.escapeIdentifier(svc.db.name)} ALLOW_CONNECTIONS true`)).catch(() => undefined);
  await svc?.stop();
});

describe('database outage', () => {
  it('answers 503 service_unavailable with Retry-After while the database is unreachable, then recovers', async () => {
    const before = await fetch(`${svc.apiUrl}/assets`, { headers: bearer(token) });
    expect(before.status).toBe(200);

    const name = pg.escapeIdentifier(svc.db.name);
    await admin(async (c) => {
      await c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [svc.db.name]);
    });

    const during = await fetch(`${svc.apiUrl}/assets`, {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'during the outage' }),
    });
    expect(during.status).toBe(503);
    expect(during.headers.get('retry-after')).toBe('1');
    const body = (await during.json()) as { error: { type: string; status: number } };
    expect(body.error).toMatchObject({ type: 'service_unavailable', status: 503 });

    await admin((c) => c.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`));
    let after = 0;
    for (let i = 0; i < 50 && after !== 201; i++) {
      const response = await fetch(`${svc.apiUrl}/assets`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'after the outage' }),
      });
      after = response.status;
      if (after !== 201) await new Promise((r) => setTimeout(r, 200));
    }
    expect(after).toBe(201);
    // Nothing of the refused create was written.
    const list = (await (await fetch(`${svc.apiUrl}/assets?q=outage`, { headers: bearer(token) })).json()) as { data: Array<{ name: string }> };
    expect(list.data.map((a) => a.name)).toEqual(['after the outage']);
  });
});
