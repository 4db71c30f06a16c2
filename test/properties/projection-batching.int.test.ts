import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assetsProjection } from '../../projections/assets/projection.js';
import { applyAuditEventAlone, auditProjection } from '../../projections/audit/projection.js';
import { tagsProjection } from '../../projections/tags/projection.js';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { CLI_ACTOR } from '../../shared/domain/actor.js';
import { createUser } from '../../shared/domain/people/commands.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/**
 * The projections that apply a batch set-based (docs/benchmarks.md, "Import of assets (issue 33)":
 * audit, assets, tags) build the same rows whatever the batching: a log of random commands (assets
 * created with tags, updated, renamed, deleted, restored; tags attached and detached; people
 * created into organizations, whose events the audit log applies one by one between the runs it
 * applies set-based), then for random prefixes of that log cut into random batches, each batch
 * one `apply` in a transaction, the tables equal those built one event at a time (the audit log's
 * through the path of a fact applied on its own, as before set-based runs), sequence numbers included.
 *
 * Reproduce: PROPERTY_SEED=<seed> PROPERTY_RUNS=<n> npx vitest run test/properties/projection-batching.int.test.ts
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261129);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 12);
const PROJECTIONS: Projection[] = [auditProjection, assetsProjection, tagsProjection];
const ONE = 'batching_one';
const MANY = 'batching_many';

let svc: TestService;
let log: RecordedEvent[] = [];

const OPS = ['create', 'create', 'update', 'rename', 'delete', 'restore', 'attach', 'detach', 'person'] as const;

beforeAll(async () => {
  svc = await startTestService('projection_batching');
  const { ctx } = svc.service;
  const org = await createOrg(ctx, 'Batching');
  const other = await createOrg(ctx, 'Batching other');
  const call = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] })).token);
  const ops = fc.sample(fc.tuple(fc.constantFrom(...OPS), fc.nat(), fc.string({ maxLength: 12 })), { seed: SEED, numRuns: 90 });
  const assets: Array<{ id: number; deleted: boolean; tags: number[] }> = [];
  let people = 0;
  for (const [op, pick, text] of ops) {
    const asset = assets.length > 0 ? assets[pick % assets.length]! : null;
    if (op === 'create' || !asset) {
      const reply = await call<{ data: { id: number; tags: Array<{ id: number }> } }>('POST', '/assets', {
        body: { name: `asset ${text}`, description: pick % 3 ? `about ${text}` : null, tags: pick % 2 ? [{ tag_type: 'barcode', value: `B-${assets.length}-${pick}` }] : [] },
      });
      expect(reply.status).toBe(201);
      assets.push({ id: reply.body.data.id, deleted: false, tags: reply.body.data.tags.map((t) => t.id) });
    } else if (op === 'update' && !asset.deleted) {
      await call('PATCH', `/assets/${asset.id}`, { body: pick % 2 ? { name: `renamed ${text}` } : { description: text || null, is_active: pick % 4 === 0 } });
    } else if (op === 'rename' && !asset.deleted) {
      await call('POST', `/assets/${asset.id}/rename`, { body: { external_key: `KEY-${asset.id}-${pick % 1000}` } });
    } else if (op === 'delete' && !asset.deleted) {
      expect((await call('DELETE', `/assets/${asset.id}`)).status).toBe(204);
      asset.deleted = true;
    } else if (op === 'restore' && asset.deleted) {
      await call('POST', `/assets/${asset.id}/restore`);
      asset.deleted = false;
    } else if (op === 'attach' && !asset.deleted) {
      const reply = await call<{ data: { id: number } }>('POST', `/assets/${asset.id}/tags`, { body: { tag_type: 'rfid', value: `R-${asset.id}-${pick % 10_000}` } });
      if (reply.status === 201) asset.tags.push(reply.body.data.id);
    } else if (op === 'detach' && !asset.deleted && asset.tags.length > 0) {
      await call('DELETE', `/assets/${asset.id}/tags/${asset.tags.pop()}`);
    } else if (op === 'person') {
      await createUser(ctx, { email: `person${people++}.batching@example.com`, orgId: pick % 2 ? org.id : other.id, role: 'viewer', by: CLI_ACTOR, publicUrl: 'http://localhost' });
    }
  }
  for (let after; ; ) {
    const batch = await ctx.store.readAll({ after, maxCount: 1000 });
    if (batch.length === 0) break;
    log.push(...batch);
    after = batch[batch.length - 1]!.position;
  }
  log = log.filter((e) => PROJECTIONS.some((p) => p.eventTypes.includes(e.type)));
  await applyMigrationGroup(ctx.pool, 'read-model', ONE);
  await applyMigrationGroup(ctx.pool, 'read-model', MANY);
}, 300_000);
afterAll(async () => {
  await svc?.stop();
});

async function reset(client: pg.PoolClient, schema: string): Promise<void> {
  const s = pg.escapeIdentifier(schema);
  await client.query(`TRUNCATE ${PROJECTIONS.flatMap((p) => p.tables.map((t) => `${s}.${pg.escapeIdentifier(t)}`)).join(', ')}`);
  await client.query(`ALTER SEQUENCE ${s}.audit_event_seq RESTART`);
}

/** `events` applied by each projection, `sizes` at a time (cycled), one transaction a batch. */
async function build(client: pg.PoolClient, schema: string, events: RecordedEvent[], sizes: number[]): Promise<void> {
  for (const projection of PROJECTIONS) {
    const relevant = events.filter((e) => projection.eventTypes.includes(e.type));
    for (let start = 0, i = 0; start < relevant.length; i++) {
      const size = sizes[i % sizes.length]!;
      await client.query(`BEGIN; SET LOCAL search_path TO ${pg.escapeIdentifier(schema)}`);
      const part = relevant.slice(start, start + size);
      // One at a time, the audit log takes the path of a fact applied on its own (no set-based run).
      if (projection === auditProjection && size === 1) await applyAuditEventAlone(client, part[0]!);
      else await projection.apply(part, client);
      await client.query('COMMIT');
      start += size;
    }
  }
}

async function tables(client: pg.PoolClient, schema: string): Promise<Record<string, unknown[]>> {
  const s = pg.escapeIdentifier(schema);
  const order: Record<string, string> = { audit_events: 'seq', audit_resource_states: 'org_id, resource_type, resource_id', assets: 'id', asset_counts: 'org_id', tags: 'id' };
  const out: Record<string, unknown[]> = {};
  for (const table of PROJECTIONS.flatMap((p) => p.tables)) out[table] = (await client.query(`SELECT * FROM ${s}.${pg.escapeIdentifier(table)} ORDER BY ${order[table]}`)).rows;
  return out;
}

describe('set-based batches of the audit, assets and tags projections', () => {
  it('give the rows of one event at a time, for random prefixes of a log in random batchings', async () => {
    const types = new Set(log.map((e) => e.type));
    for (const type of ['AssetCreated', 'AssetUpdated', 'AssetRenamed', 'AssetDeleted', 'AssetRestored', 'TagAttached', 'TagDetached', 'UserCreated']) expect(types).toContain(type);
    const client = await svc.service.ctx.pool.connect();
    try {
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: log.length }), fc.array(fc.integer({ min: 1, max: 80 }), { minLength: 1, maxLength: 8 }), async (length, sizes) => {
          const events = log.slice(0, length);
          await reset(client, ONE);
          await reset(client, MANY);
          await build(client, ONE, events, [1]);
          await build(client, MANY, events, sizes);
          const one = await tables(client, ONE);
          expect(await tables(client, MANY)).toEqual(one);
        }),
        { seed: SEED, numRuns: RUNS, examples: [[log.length, [log.length]]] },
      );
    } finally {
      client.release();
    }
  }, 600_000);
});
