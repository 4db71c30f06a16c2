import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyMigrationGroup } from '../../shared/db/migrate.js';
import { createPool, type Pool } from '../../shared/db/pool.js';
import { countStream } from '../../shared/domain/counts/events.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { decodeReads, encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import { comparePositions, START, type EventData, type Position, type RecordedEvent } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import { rebuildProjections } from '../../shared/projection/rebuild.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { segmentName } from '../../shared/projection/segments.js';
import { seededRandom as random } from '../../shared/random.js';
import { countsProjection } from '../../projections/counts/projection.js';
import { eventually } from '../event-store/conformance.js';
import { readLogUpTo } from '../support/read-log.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The counts subscriber (docs/design.md "Counts") against a reference model written from the
 * rules' text (docs/api.md "Counts", its "What counts" list): random trees (with moves), assets (deleted,
 * restored), counts started on random zones and closed, reads inside and outside the window and
 * the zone, late ones (arriving after the close, observed before it), reads observed after the
 * close, reads observed ahead of their arrival (the reader's clock ahead of the service's: some
 * arrive before a start and are observed after it, some arrive while a count is open and are
 * observed after its close), redeliveries and ties, are appended to a real event store; the
 * `counts` projection is run by the real projector with a random batch size and 1 to 8 segments;
 * its counts and items must equal the model's, and so must a `projections rebuild`. The model is a
 * naive replay of the log: every read kept (with the tree as it stood at it), the current location
 * recomputed from all of them at each start, and at the end a read counts for a count iff its
 * observed time is in [started_at, closed_at] (open: from started_at on), whenever it arrived.
 *
 * Reproduce a failure with the seed it prints: PROPERTY_SEED=<seed> PROPERTY_RUNS=<n> npx vitest run test/properties/counts-reference.int.test.ts
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261130);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 8);
const S = 1_000_000;
const log = createLogger('silent');
let db: TestDatabase;
let pool: Pool;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase('counts_reference');
  pool = createPool(db.url, { max: 30 });
  store = new PostgresEventStore(pool, db.url, { pollIntervalMs: 20 });
});

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
});

const tagOf = (assetId: number) => `E28011606000020900000${String(assetId).padStart(3, '0')}`;
const iso = (us: number) => new Date(Math.floor(us / 1000)).toISOString();
const ACTOR = { type: 'api_key', id: 'key-1', name: 'ops key' };

/** Appends a random history of one organization; its last position. */
async function appendHistory(orgId: number, seed: number): Promise<Position> {
  const rnd = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rnd() * items.length)]!;
  const int = (min: number, max: number) => min + Math.floor(rnd() * (max - min + 1));
  const appends: Array<{ stream: string; event: EventData }> = [];
  const at = () => new Date().toISOString();
  const locations = int(3, 7);
  const assets = int(2, 8);
  const parents = new Map<number, number | null>();
  for (let id = 1; id <= locations; id++) {
    const parent = id === 1 || rnd() < 0.35 ? null : int(1, id - 1);
    parents.set(id, parent);
    appends.push({
      stream: `location-${orgId}-${id}`,
      event: {
        type: 'LocationCreated',
        data: { org_id: orgId, location_id: id, external_key: `L${id}`, name: `L${id}`, description: null, parent_id: parent, is_active: true, valid_from: null, valid_to: null, at: at() },
      },
    });
  }
  // The service's clock, in the history: it only moves forward; reads are observed around it.
  let now = Date.now() * 1000;
  const delivered: Array<{ read: RawRead; locationId: number }> = [];
  const open = new Set<number>();
  const closedAt = new Map<number, number>();
  let nextCount = 1;
  const deleted = new Set<number>();
  const ops = int(30, 110);
  for (let i = 0; i < ops; i++) {
    const r = rnd();
    now += int(0, 20) * S + int(0, 999_999);
    if (r < 0.55) {
      // One event of 1 to 4 reads at one location: mostly around now, some late (observed before a
      // close, or before a start), some ahead of the clock, some delivered again.
      const locationId = int(1, locations);
      const reads: RawRead[] = [];
      for (let n = int(1, 4); n > 0; n--) {
        const again = delivered.filter((d) => d.locationId === locationId);
        if (again.length > 0 && rnd() < 0.1) {
          reads.push(pick(again).read);
          continue;
        }
        const closes = [...closedAt.values()];
        let us = now - int(0, 3) * S;
        const kind = rnd();
        if (kind < 0.15 && closes.length > 0) us = pick(closes) - int(0, 30) * S; // late: observed before a close
        else if (kind < 0.22 && closes.length > 0) us = pick(closes) + int(0, 2) * S; // just after a close (or at it)
        else if (kind < 0.285) us = now + int(1, 60) * S; // a clock ahead: observed after its arrival
        else if (kind < 0.3) us = now + int(60, 400) * S + int(0, 999_999); // far ahead: past starts and closes still to come
        else if (kind < 0.38) us = now - int(30, 600) * S; // late
        const tie = delivered.length > 0 && rnd() < 0.08;
        if (tie) us = pick(delivered).read.observedUs;
        const read: RawRead = { tag_type: 'rfid', value: tagOf(int(1, assets)), observedUs: us, rssi: -60, capturePoint: `door-${locationId}` };
        reads.push(read);
        delivered.push({ read, locationId });
      }
      const { capturePoints, ...encoded } = encodeReads(reads, (read) => ({ assetId: Number(read.value.slice(-3)), cause: null }));
      // `at`: when the reads reach the service, on the clock of the counts' start and close.
      const data: ScansRecordedData = { org_id: orgId, location_id: locationId, source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints }, ...encoded, at: iso(now) };
      appends.push({ stream: locationScansStream(orgId, locationId), event: { type: ScansRecorded.type, data: data as never } });
    } else if (r < 0.65 && nextCount <= 5) {
      const countId = nextCount++;
      open.add(countId);
      appends.push({
        stream: countStream(orgId, countId),
        event: { type: 'CountStarted', data: { org_id: orgId, count_id: countId, name: rnd() < 0.5 ? null : `count ${countId}`, location_id: rnd() < 0.7 ? int(2, locations) : 1, at: iso(now) }, metadata: { actor: ACTOR } },
      });
    } else if (r < 0.75 && open.size > 0) {
      const countId = pick([...open]);
      open.delete(countId);
      closedAt.set(countId, Math.floor(now / 1000) * 1000);
      appends.push({ stream: countStream(orgId, countId), event: { type: 'CountClosed', data: { org_id: orgId, count_id: countId, at: iso(now) }, metadata: { actor: ACTOR } } });
    } else if (r < 0.85) {
      // A location moved under another (never under itself or its subtree), or to the root.
      const id = int(2, locations);
      const under = (a: number | null): boolean => a !== null && (a === id || under(parents.get(a) ?? null));
      const parent = pick([null, ...[...parents.keys()].filter((p) => !under(p))]);
      appends.push({ stream: `location-${orgId}-${id}`, event: { type: 'LocationMoved', data: { org_id: orgId, location_id: id, parent_id: parent, previous_parent_id: parents.get(id) ?? null, at: at() } } });
      parents.set(id, parent);
    } else {
      const assetId = int(1, assets);
      const type = deleted.has(assetId) ? 'AssetRestored' : 'AssetDeleted';
      if (deleted.has(assetId)) deleted.delete(assetId);
      else deleted.add(assetId);
      appends.push({ stream: `asset-${orgId}-${assetId}`, event: { type, data: { org_id: orgId, asset_id: assetId, external_key: `A${assetId}`, at: at() } } });
    }
  }
  let head: Position = START;
  for (const a of appends) head = (await store.appendToStream(a.stream, [a.event])).position;
  return head;
}

// ---------------------------------------------------------------------------------------------
// The reference model: docs/api.md "Counts", applied naively to the whole log.

interface Sighting {
  location: number;
  us: number;
}

interface ModelCount {
  org: number;
  id: number;
  location: number;
  startUs: number;
  closeUs: number | null;
  /** Where the start and the close are in the log. */
  startOrder: number;
  closeOrder: number | null;
  expected: Set<number>;
  zone: Map<number, Sighting>;
  out: Map<number, Sighting>;
}

const micros = (rfc3339: string) => Date.parse(rfc3339) * 1000;

/** The fields of the events the model reads (each event has some of them). */
interface Fields {
  org_id: number;
  location_id: number;
  parent_id: number | null;
  asset_id: number;
  count_id: number;
  at: string;
}

/** A read as delivered: its asset, where, when observed, the zones it is in (the tree at the read), its place in the log. */
interface ModelRead {
  org: number;
  asset: number;
  location: number;
  us: number;
  chain: Set<number>;
  order: number;
}

/** How often the histories exercised the two cases of reads observed ahead of their arrival. */
const ahead = { beforeStart: 0, afterClose: 0 };

function referenceCounts(events: readonly RecordedEvent[]): ModelCount[] {
  const tree = new Map<string, number | null>();
  /** Every read of an asset so far: where, when observed, and its place in the log. */
  const reads = new Map<string, Array<{ location: number; us: number; order: number }>>();
  const all: ModelRead[] = [];
  const deleted = new Set<string>();
  const counts: ModelCount[] = [];
  const ancestors = (org: number, location: number) => {
    const chain = new Set<number>();
    for (let at: number | null | undefined = location; at != null && !chain.has(at); at = tree.get(`${org}/${at}`)) chain.add(at);
    return chain;
  };
  /** The report's current location: the latest read by observed time, then log order. */
  const currentLocation = (key: string) => {
    let best: { location: number; us: number; order: number } | null = null;
    for (const read of reads.get(key) ?? []) if (!best || read.us > best.us || (read.us === best.us && read.order > best.order)) best = read;
    return best?.location ?? null;
  };
  let order = 0;
  for (const event of events) {
    const d = event.data as unknown as Fields;
    switch (event.type) {
      case 'LocationCreated':
      case 'LocationMoved':
      case 'LocationRestored':
        tree.set(`${d.org_id}/${d.location_id}`, d.parent_id ?? null);
        break;
      case 'AssetDeleted':
        deleted.add(`${d.org_id}/${d.asset_id}`);
        break;
      case 'AssetRestored':
        deleted.delete(`${d.org_id}/${d.asset_id}`);
        break;
      case 'CountStarted': {
        // Expected: the assets whose current location is in the zone here in the log.
        const org = d.org_id;
        const expected = new Set<number>();
        for (const key of reads.keys()) {
          const [o, asset] = key.split('/').map(Number) as [number, number];
          const location = currentLocation(key);
          if (o === org && !deleted.has(key) && location !== null && ancestors(org, location).has(d.location_id)) expected.add(asset);
        }
        counts.push({ org, id: d.count_id, location: d.location_id, startUs: micros(d.at), closeUs: null, startOrder: order++, closeOrder: null, expected, zone: new Map(), out: new Map() });
        break;
      }
      case 'CountClosed': {
        const count = counts.find((c) => c.org === d.org_id && c.id === d.count_id);
        if (count && count.closeUs === null) {
          count.closeUs = micros(d.at);
          count.closeOrder = order++;
        }
        break;
      }
      case ScansRecorded.type: {
        const data = event.data as unknown as ScansRecordedData;
        if (data.location_id === null) break;
        for (const read of decodeReads(data)) {
          if (read.assetId === null) continue;
          const key = `${data.org_id}/${read.assetId}`;
          reads.set(key, [...(reads.get(key) ?? []), { location: data.location_id, us: read.observedUs, order }]);
          all.push({ org: data.org_id, asset: read.assetId, location: data.location_id, us: read.observedUs, chain: ancestors(data.org_id, data.location_id), order: order++ });
        }
        break;
      }
    }
  }
  // The text: a read counts for a count iff its observed time is in [started_at, closed_at] (open:
  // from started_at on), whenever it arrived; in the zone or out by the tree at the read; each side
  // keeps its latest sighting (a tie: the first in the log).
  for (const count of counts) {
    for (const read of all) {
      if (read.org !== count.org || read.us < count.startUs || (count.closeUs !== null && read.us > count.closeUs)) continue;
      if (read.order < count.startOrder) ahead.beforeStart++;
      const side = read.chain.has(count.location) ? count.zone : count.out;
      const before = side.get(read.asset);
      if (!before || read.us > before.us) side.set(read.asset, { location: read.location, us: read.us });
    }
    if (count.closeUs !== null)
      for (const read of all) if (read.org === count.org && read.order > count.startOrder && read.order < count.closeOrder! && read.us > count.closeUs) ahead.afterClose++;
  }
  return counts;
}

function modelRows(counts: ModelCount[]): { counts: string[]; items: string[] } {
  const items: string[] = [];
  for (const c of counts) {
    const assets = new Set([...c.expected, ...c.zone.keys()]);
    for (const asset of assets) {
      const zone = c.zone.get(asset);
      const out = c.out.get(asset);
      const status = !c.expected.has(asset) ? 'unexpected' : zone ? 'found' : out ? 'misplaced' : 'missing';
      const seen = zone ?? (status === 'misplaced' ? out : undefined);
      items.push([c.org, c.id, asset, status, seen?.location ?? '', seen?.us ?? ''].join(' '));
    }
  }
  return { counts: counts.map((c) => [c.org, c.id, c.location, c.startUs, c.closeUs ?? ''].join(' ')).sort(), items: items.sort() };
}

// ---------------------------------------------------------------------------------------------

const readLog = (head: Position) => readLogUpTo(store, head);

/** A fresh read-model schema with `counts` applied up to `head` by the followers of `segments` segments. */
async function project(schema: string, segments: number, batchSize: number, head: Position): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
  await applyMigrationGroup(pool, 'read-model', schema);
  const runtime = new ProjectorRuntime({ store, pool, schema, projections: [countsProjection], log, batchSize, takeoverIntervalMs: 50, leaseMs: 5_000, segments: { all: segments, byName: {} } });
  runtime.start();
  try {
    await eventually(async () => {
      for (let index = 0; index < segments; index++) {
        const at = await readCheckpoint(pool, schema, segmentName('counts', index, segments));
        expect(comparePositions(at, head)).toBeGreaterThanOrEqual(0);
      }
    }, 60_000);
  } finally {
    await runtime.stop();
  }
}

const US = (column: string) => `coalesce((extract(epoch FROM ${column}) * 1000000)::bigint::text, '')`;

async function tableRows(schema: string): Promise<{ counts: string[]; items: string[] }> {
  const s = pg.escapeIdentifier(schema);
  const counts = await pool.query<{ row: string }>(`SELECT concat_ws(' ', org_id, count_id, location_id, ${US('started_at')}, ${US('closed_at')}) AS row FROM ${s}.counts`);
  const items = await pool.query<{ row: string }>(
    `SELECT concat_ws(' ', org_id, count_id, asset_id, status, coalesce(seen_location_id::text, ''),
            ${US("(CASE WHEN zone_seen_at IS NOT NULL THEN zone_seen_at ELSE out_seen_at END)")}) AS row FROM ${s}.count_items`,
  );
  return { counts: counts.rows.map((r) => r.row).sort(), items: items.rows.map((r) => r.row).sort() };
}

describe('counts subscriber against the reference model', () => {
  it('gives the model’s counts and items for any history, batch size and 1 to 8 segments; so does a rebuild', { timeout: 600_000 }, async () => {
    let run = 0;
    const seen = { found: 0, misplaced: 0, missing: 0, unexpected: 0 };
    await fc.assert(
      fc.asyncProperty(fc.integer(), fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 8 }), async (seed, batch, segments) => {
        run++;
        const orgId = 100 + run;
        const head = await appendHistory(orgId, seed);
        const events = await readLog(head);
        const model = modelRows(referenceCounts(events));
        const mine = model.items.filter((row) => row.startsWith(`${orgId} `));
        for (const status of ['found', 'misplaced', 'missing', 'unexpected'] as const) seen[status] += mine.filter((row) => row.split(' ')[3] === status).length;
        const schema = `counts_run_${run}`;
        await project(schema, segments, batch, head);
        const projected = await tableRows(schema);
        if (JSON.stringify(projected) !== JSON.stringify(model)) {
          console.error(`counts property: failing history (org ${orgId}, ${segments} segments, batch ${batch}):`);
          console.error(JSON.stringify(events.filter((e) => (e.data as { org_id?: number }).org_id === orgId).map((e) => ({ type: e.type, data: e.type === ScansRecorded.type ? { ...e.data, decoded: decodeReads(e.data as never).map((r) => [r.assetId, r.observedUs]) } : e.data }))));
        }
        expect(projected, `seed ${seed}, ${segments} segments, batch ${batch}`).toEqual(model);

        // Rebuilt with another number of segments (1 → 2, …, 8 → 1).
        const other = (segments % 8) + 1;
        await rebuildProjections({ store, pool, log, projections: [countsProjection], schema, segments: { all: other, byName: {} }, batchSize: batch * 3 });
        expect(await tableRows(schema), `rebuild with ${other} segments`).toEqual(model);
        await pool.query(`DROP SCHEMA ${pg.escapeIdentifier(schema)} CASCADE`);
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
    // The histories did produce every status (a model that counts nothing would agree with anything).
    console.log(`counts property: items by status over ${RUNS} histories: ${JSON.stringify(seen)}; reads observed ahead: ${JSON.stringify(ahead)}`);
    for (const status of ['found', 'misplaced', 'missing', 'unexpected'] as const) expect(seen[status], status).toBeGreaterThanOrEqual(RUNS / 2);
    // And both cases of reads observed ahead of their arrival: counted though they arrived before
    // the start; arrived while open, observed after the close (so not counted once closed).
    expect(ahead.beforeStart, 'reads arriving before a start that count for it').toBeGreaterThanOrEqual(RUNS / 2);
    expect(ahead.afterClose, 'reads arriving while open, observed after the close').toBeGreaterThanOrEqual(RUNS / 2);
  });
});
