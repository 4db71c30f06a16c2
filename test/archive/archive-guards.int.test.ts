import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { ArchivedLog } from '../../shared/archive/archived-log.js';
import { ARCHIVE_LOCK, ArchiveForeignError, archiveInstallationId, archiveScanEvents, archivedThrough } from '../../shared/archive/scan-archive.js';
import { MANIFEST_FILE, readManifest } from '../../shared/archive/segment-file.js';
import { createPool } from '../../shared/db/pool.js';
import { LocationCreated } from '../../shared/domain/locations/events.js';
import { ScansRecorded } from '../../shared/domain/scans/events.js';
import { START, comparePositions, formatPosition, type RecordedEvent } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import type { Projection } from '../../shared/projection/projection.js';
import { rebuildProjections } from '../../shared/projection/rebuild.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { projectionStatuses } from '../../shared/projection/status.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { capturedLog } from '../support/logs.js';
import { appendScanLog } from './scan-log.js';
import { settledHead } from '../support/visible.js';

/**
 * docs/design.md "The scan archive", its guards: a projection that starts behind the end of the
 * archive (added after archiving, or reset) is not followed (it would skip the archived scans)
 * until `projections rebuild`, while one that reads no scan event runs; and an archive directory
 * whose manifest names another installation is refused by a run and by a reader, untouched.
 */

const projections = allProjections();
const names = projections.map((p) => p.name);

let db: TestDatabase;
let pool: pg.Pool;
let store: PostgresEventStore;
let dir: string;
let foreign: string;

/** A projection added after archiving: it keeps what it was given, and writes no table. */
function lateProjection(name: string, eventTypes: string[], seen: RecordedEvent[]): Projection {
  return {
    name,
    eventTypes,
    tables: [],
    async apply(events) {
      seen.push(...events.filter((e) => eventTypes.includes(e.type)));
    },
  };
}

async function files(at: string): Promise<Record<string, string>> {
  const names = (await fs.readdir(at)).sort();
  return Object.fromEntries(await Promise.all(names.map(async (n) => [n, (await fs.readFile(path.join(at, n))).toString('base64')] as const)));
}

beforeAll(async () => {
  db = await createTestDatabase('archive_guards');
  pool = createPool(db.url, { max: projections.length + 14, applicationName: 'archive-guards-test' });
  store = new PostgresEventStore(pool, db.url);
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'scan-archive-'));
  foreign = await fs.mkdtemp(path.join(os.tmpdir(), 'scan-archive-foreign-'));
  await appendScanLog(store, { orgId: 1, firstId: 1, locations: 4, assets: 20, scanEvents: 240, perAppend: 8, masterEvery: 3 });
  await new Promise((resolve) => setTimeout(resolve, 20));
  const cutoff = new Date();
  await new Promise((resolve) => setTimeout(resolve, 20));
  await appendScanLog(store, { orgId: 1, firstId: 500, locations: 2, assets: 5, scanEvents: 20, seed: 3 });
  await rebuildProjections({ store, pool, log: createLogger('silent'), projections, batchSize: 100 });
  const run = await archiveScanEvents({ pool, dir, olderThan: cutoff, projections: names, maxSegmentEvents: 50 });
  expect(run.events).toBeGreaterThan(100);
}, 300_000);

afterAll(async () => {
  await store?.close();
  await pool?.end();
  await db?.drop();
  for (const d of [dir, foreign]) if (d) await fs.rm(d, { recursive: true, force: true });
});

describe('a projection behind the archive', () => {
  it('is not followed when it reads scans, and says it needs a rebuild; one that reads none runs', async () => {
    const scans: RecordedEvent[] = [];
    const master: RecordedEvent[] = [];
    const subscribed: RecordedEvent[] = [];
    const { log, lines } = capturedLog('info');
    const runtime = new ProjectorRuntime({
      store,
      pool,
      log,
      projections: [
        lateProjection('late_scans', [ScansRecorded.type], scans),
        lateProjection('late_master', [LocationCreated.type], master),
        // Like the webhooks subscriber: it may begin with the store's log.
        { ...lateProjection('late_subscriber', [ScansRecorded.type], subscribed), skipsArchivedEvents: true },
      ],
      behindArchiveRetryMs: 200,
    });
    runtime.start();
    try {
      const head = await settledHead(store, pool);
      await expect.poll(async () => comparePositions(await readCheckpoint(pool, 'read_model', 'late_subscriber'), head), { timeout: 30_000 }).toBe(0);
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM event_store.events WHERE type = 'ScansRecorded'`);
      expect(subscribed.length).toBe(rows[0]!.n);
      // The one that reads no scan event catches up through the whole store's log.
      await expect.poll(async () => comparePositions(await readCheckpoint(pool, 'read_model', 'late_master'), head), { timeout: 30_000 }).toBe(0);
      expect(master.length).toBe(6);
      // The other stays where it was, and is said to need a rebuild, again and again.
      await expect.poll(() => lines().filter((l) => l.projection === 'late_scans' && l.level === 50).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
      const said = lines().find((l) => l.projection === 'late_scans')!;
      expect(said.msg).toContain('run `npx tracking projections rebuild late_scans` (it reads the archive); not running it live');
      expect(said.archivedThrough).toBe(formatPosition((await archivedThrough(pool))!));
      expect(scans).toEqual([]);
      expect(await readCheckpoint(pool, 'read_model', 'late_scans')).toEqual(START);
    } finally {
      await runtime.stop();
    }

    const statuses = await projectionStatuses(store, pool, [...projections, { name: 'late_scans', eventTypes: [ScansRecorded.type] }, { name: 'late_master', eventTypes: [LocationCreated.type] }], { archive: true });
    const needs = Object.fromEntries(statuses.map((s) => [s.name, s.needs_rebuild]));
    expect(needs.late_scans).toContain('before the end of the scan archive');
    expect(needs.late_master).toBeNull();
    for (const name of names) expect(needs[name], name).toBeNull();

    // A followed projection reset to the start of the log: named too, until a rebuild (which reads the archive) brings it past.
    await pool.query(`UPDATE read_model.projection_checkpoints SET position = $1 WHERE name = 'tracking'`, [formatPosition(START)]);
    const [reset] = await projectionStatuses(store, pool, projections.filter((p) => p.name === 'tracking'), { archive: true });
    expect(reset!.needs_rebuild).toContain('npx tracking projections rebuild tracking');
    await rebuildProjections({ store, pool, log: createLogger('silent'), projections: projections.filter((p) => p.name === 'tracking'), archiveDir: dir, batchSize: 100 });
    const [rebuilt] = await projectionStatuses(store, pool, projections.filter((p) => p.name === 'tracking'), { archive: true });
    expect(rebuilt!.needs_rebuild).toBeNull();
    await pool.query(`DELETE FROM read_model.projection_checkpoints WHERE name IN ('late_scans', 'late_master', 'late_subscriber')`);
  }, 120_000);
});

describe('a projection while an archive run holds the archive', () => {
  it('is not held up when it is past the archive, and still refused when behind it', async () => {
    const holder = await pool.connect();
    const scans: RecordedEvent[] = [];
    const behind: RecordedEvent[] = [];
    const { log, lines } = capturedLog('info');
    const head = await settledHead(store, pool);
    await pool.query(`INSERT INTO read_model.projection_checkpoints (name, position) VALUES ('ahead_scans', $1)`, [formatPosition(head)]);
    const runtime = new ProjectorRuntime({
      store,
      pool,
      log,
      projections: [lateProjection('ahead_scans', [ScansRecorded.type], scans), lateProjection('behind_scans', [ScansRecorded.type], behind)],
      behindArchiveRetryMs: 200,
    });
    try {
      // As an archive run holds it, from its start to its end.
      await holder.query('SELECT pg_advisory_lock(hashtext($1))', [ARCHIVE_LOCK]);
      runtime.start();
      await appendScanLog(store, { orgId: 1, firstId: 900, locations: 1, assets: 2, scanEvents: 3, seed: 5 });
      await expect.poll(() => scans.length, { timeout: 30_000 }).toBe(3);
      await expect.poll(() => lines().filter((l) => l.projection === 'behind_scans' && l.level === 50).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
      expect(behind).toEqual([]);
    } finally {
      await runtime.stop();
      await holder.query('SELECT pg_advisory_unlock(hashtext($1))', [ARCHIVE_LOCK]);
      holder.release();
      await pool.query(`DELETE FROM read_model.projection_checkpoints WHERE name IN ('ahead_scans', 'behind_scans')`);
    }
  }, 60_000);
});

describe('an archive directory of another installation', () => {
  it('is refused by a run and by a reader, and left as it is', async () => {
    const ours = await archiveInstallationId(pool);
    expect((await readManifest(dir)).installation).toBe(ours);
    // Another installation's archive: its manifest names it, and it has segments this database does not know.
    for (const name of await fs.readdir(dir)) await fs.copyFile(path.join(dir, name), path.join(foreign, name));
    const theirs = randomUUID();
    const manifest = await readManifest(foreign);
    await fs.writeFile(path.join(foreign, MANIFEST_FILE), JSON.stringify({ ...manifest, installation: theirs }));
    await fs.writeFile(path.join(foreign, 'scans-1.1-2.2.jsonl.br'), 'theirs');
    const before = await files(foreign);

    const run = archiveScanEvents({ pool, dir: foreign, olderThan: new Date(), projections: names });
    await expect(run).rejects.toBeInstanceOf(ArchiveForeignError);
    await expect(run).rejects.toThrow(`names installation ${theirs}; this database is installation ${ours}`);
    await expect(ArchivedLog.open({ store, pool, dir: foreign })).rejects.toBeInstanceOf(ArchiveForeignError);
    expect(await files(foreign)).toEqual(before);

    // Our own directory is read as before.
    const own = await ArchivedLog.open({ store, pool, dir });
    try {
      expect((await own.readAll({ maxCount: 10 })).length).toBe(10);
    } finally {
      await own.close();
    }
  }, 60_000);
});
