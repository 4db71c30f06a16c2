import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assetReads, lastReadAtOrBefore } from '../../projections/tracking/queries.js';
import { runRetention, retentionStatus } from '../../projections/tracking/retention.js';
import { visitsOf as runsOf } from '../../projections/tracking/current-location.js';
import { CHUNK_READS, chunksOf, decodeChunk, encodeChunk, type ChunkRead } from '../../projections/tracking/read-chunks.js';
import { seededRandom as random, shuffled as shuffle } from '../../shared/random.js';
import { startTestService, type TestService } from '../support/service.js';
import { deliverPlacedReads } from '../support/scans.js';
import { watchStatements } from '../support/statements.js';

/**
 * The tracking storage (docs/design.md "Tracking storage"): reads in compact chunks across
 * partition boundaries, late reads that split visits among many chunks, reads far in the past and
 * future, and retention that drops whole partitions only (docs/operations.md "Retention").
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService('tracking_storage', { ROLES: 'projector' });
});
afterAll(async () => {
  await svc?.stop();
});

interface Read {
  assetId: number;
  locationId: number;
  us: number;
}

const tagOf = (assetId: number) => `E28011606000020800000${String(assetId).padStart(3, '0')}`;

/** Delivers reads in this order, in batches of 1 to `maxBatch`, each batch split by location. */
const deliver = (orgId: number, reads: Read[], rnd: () => number, maxBatch = 40) =>
  deliverPlacedReads(svc, orgId, reads.map((r) => ({ ...r, tag: tagOf(r.assetId) })), rnd, maxBatch);

type VisitTuple = [location: number, firstUs: number, lastUs: number];

function expectedVisits(reads: Read[]): Record<number, VisitTuple[]> {
  const byAsset: Record<number, VisitTuple[]> = {};
  for (const read of [...reads].sort((a, b) => a.us - b.us)) {
    const visits = (byAsset[read.assetId] ??= []);
    const last = visits.at(-1);
    if (last && last[0] === read.locationId) last[2] = read.us;
    else visits.push([read.locationId, read.us, read.us]);
  }
  return byAsset;
}

async function visitsOf(orgId: number): Promise<Record<number, VisitTuple[]>> {
  const { rows } = await svc.service.ctx.pool.query<{ asset_id: number; location_id: number; first_us: string; last_us: string }>(
    `SELECT asset_id, location_id, (extract(epoch FROM first_at) * 1000000)::bigint::text AS first_us, (extract(epoch FROM last_at) * 1000000)::bigint::text AS last_us
       FROM asset_visits WHERE org_id = $1 ORDER BY asset_id, first_at, first_seq`,
    [orgId],
  );
  const byAsset: Record<number, VisitTuple[]> = {};
  for (const row of rows) (byAsset[row.asset_id] ??= []).push([row.location_id, Number(row.first_us), Number(row.last_us)]);
  return byAsset;
}

/** Every read the chunks hold, per asset, in (observed, seq) order, decoded in SQL. */
async function chunkReadsOf(orgId: number): Promise<Record<number, Array<[number, number]>>> {
  const { rows } = await svc.service.ctx.pool.query<{ asset_id: number; us: string; location_id: number }>(
    `SELECT c.asset_id, (extract(epoch FROM r.observed_at) * 1000000)::bigint::text AS us, r.location_id
       FROM scan_read_chunks c, tracking_chunk_reads(c.first_at, c.first_seq, c.data) r WHERE c.org_id = $1 ORDER BY c.asset_id, r.observed_at, r.seq`,
    [orgId],
  );
  const byAsset: Record<number, Array<[number, number]>> = {};
  for (const row of rows) (byAsset[row.asset_id] ??= []).push([Number(row.us), row.location_id]);
  return byAsset;
}

/** Each chunk of an asset, in order: its first and last read (µs) and its number of reads. */
async function chunkLayoutOf(orgId: number, assetId: number): Promise<Array<[number, number, number]>> {
  const { rows } = await svc.service.ctx.pool.query<{ first_us: string; last_us: string; reads: number }>(
    `SELECT (extract(epoch FROM first_at) * 1000000)::bigint::text AS first_us, (extract(epoch FROM last_at) * 1000000)::bigint::text AS last_us, reads
       FROM scan_read_chunks WHERE org_id = $1 AND asset_id = $2 ORDER BY first_at, first_seq`,
    [orgId, assetId],
  );
  return rows.map((r) => [Number(r.first_us), Number(r.last_us), r.reads]);
}

async function partitionNames(): Promise<string[]> {
  const { rows } = await svc.service.ctx.pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent IN ('scan_read_chunks'::regclass, 'asset_visits'::regclass, 'scan_read_keys'::regclass) ORDER BY 1`,
  );
  return rows.map((r) => r.name);
}

const DAY_US = 86_400_000_000;

describe('read chunks', () => {
  it('encode and decode every read exactly; cut at 128 reads and at a month end', () => {
    const rnd = random(3);
    const reads: ChunkRead[] = [];
    let us = Date.UTC(2026, 0, 31, 23, 0, 0) * 1000;
    for (let i = 0; i < 700; i++) {
      us += Math.floor(rnd() * 30_000_000) + (rnd() < 0.1 ? 0 : 1);
      reads.push({ us, seq: 1000 + Math.floor(rnd() * 5000), locationId: rnd() < 0.9 ? 7 : 1 + Math.floor(rnd() * 300_000) });
    }
    reads.sort((a, b) => a.us - b.us || a.seq - b.seq);
    const chunks = chunksOf(reads);
    expect(chunks.flatMap((c) => decodeChunk(c.firstUs, c.firstSeq, encodeChunk(c.reads)))).toEqual(reads);
    expect(chunks.every((c) => c.reads.length <= CHUNK_READS)).toBe(true);
    expect(chunks.some((c) => new Date(c.firstUs / 1000).getUTCMonth() === 1)).toBe(true);
    for (const c of chunks) expect(new Date(c.firstUs / 1000).getUTCMonth()).toBe(new Date(c.lastUs / 1000).getUTCMonth());
    // A parked tag read every 2 seconds: 6 bytes a read.
    const parked = Array.from({ length: CHUNK_READS }, (_, i) => ({ us: us + i * 2_000_000, seq: 10_000 + i * 300, locationId: 42 }));
    expect(encodeChunk(parked).length).toBeLessThanOrEqual(6 * CHUNK_READS + 2);
    expect(runsOf(parked)).toHaveLength(1);
  });
});

describe('the last read of a chunk at or before an instant, in SQL (the report at an instant)', () => {
  it('equals the last decoded read at or before it, for random chunks and instants, to the microsecond', async () => {
    const rnd = random(11);
    const cases: Array<{ firstUs: number; data: Buffer; atUs: number; expected: number | null }> = [];
    for (let c = 0; c < 300; c++) {
      const reads: ChunkRead[] = [];
      // Deltas of 0 (reads at one instant), of one microsecond, and of days (multi-byte varints).
      let us = Date.UTC(2020 + Math.floor(rnd() * 10), Math.floor(rnd() * 12), 1) * 1000 + Math.floor(rnd() * 1e9);
      const count = 1 + Math.floor(rnd() * CHUNK_READS);
      for (let i = 0; i < count; i++) {
        if (i > 0) us += [0, 1, Math.floor(rnd() * 3_000_000), Math.floor(rnd() * 2 * DAY_US)][Math.floor(rnd() * 4)]!;
        reads.push({ us, seq: 1 + Math.floor(rnd() * 1e9), locationId: rnd() < 0.8 ? 5 : 1 + Math.floor(rnd() * 1e6) });
      }
      reads.sort((a, b) => a.us - b.us || a.seq - b.seq);
      const data = encodeChunk(reads);
      const first = reads[0]!.us;
      const last = reads.at(-1)!.us;
      // Before the first read, at a read, a microsecond either side of one, and past the last.
      const pick = reads[Math.floor(rnd() * reads.length)]!.us;
      for (const atUs of [first - 1, first, pick - 1, pick, pick + 1, first + Math.floor(rnd() * (last - first + 1)), last, last + DAY_US]) {
        const kept = reads.filter((r) => r.us <= atUs);
        cases.push({ firstUs: first, data, atUs, expected: kept.length === 0 ? null : kept.at(-1)!.us });
      }
    }
    const { rows } = await svc.service.ctx.pool.query<{ us: string | null }>(
      `SELECT (extract(epoch FROM tracking_chunk_last_read_at(timestamptz 'epoch' + t.first_us * interval '1 microsecond', t.data,
                                                          timestamptz 'epoch' + t.at_us * interval '1 microsecond')) * 1000000)::bigint::text AS us
         FROM unnest($1::bigint[], $2::bytea[], $3::bigint[]) WITH ORDINALITY AS t(first_us, data, at_us, n) ORDER BY t.n`,
      [cases.map((c) => c.firstUs), cases.map((c) => c.data), cases.map((c) => c.atUs)],
    );
    expect(rows.map((r) => (r.us === null ? null : Number(r.us)))).toEqual(cases.map((c) => c.expected));
    expect(cases.filter((c) => c.expected === null).length).toBeGreaterThan(250);
  });
});

describe('tracking storage', () => {
  it('many reads per asset (many chunks, across a month boundary), in random orders and batchings, redelivered: exact visits', { timeout: 300_000 }, async () => {
    const rnd = random(11);
    const reads: Read[] = [];
    for (let asset = 1; asset <= 2; asset++) {
      let location = 1;
      let us = Date.UTC(2026, 2, 31, 22, 0, 0) * 1000 + asset;
      for (let i = 0; i < 450; i++) {
        if (rnd() < 0.08) location = 1 + Math.floor(rnd() * 3);
        us += 1 + Math.floor(rnd() * 40_000_000);
        reads.push({ assetId: asset, locationId: location, us });
      }
    }
    const expected = expectedVisits(reads);
    for (let trial = 0; trial < 4; trial++) {
      const orgId = 7100 + trial;
      const trialRnd = random(500 + trial);
      const order = trial === 0 ? reads : trial === 1 ? shuffle(reads, trialRnd) : [...reads].sort((a, b) => a.us - b.us + (trialRnd() < 0.15 ? 1e10 : 0));
      const again = order.filter(() => trialRnd() < 0.05);
      await deliver(orgId, [...order, ...again], trialRnd);
      expect(await visitsOf(orgId), `trial ${trial}`).toEqual(expected);
      const held = await chunkReadsOf(orgId);
      for (const asset of [1, 2]) {
        expect(held[asset], `trial ${trial}`).toEqual(reads.filter((r) => r.assetId === asset).sort((a, b) => a.us - b.us).map((r) => [r.us, r.locationId]));
      }
      if (trial !== 0) continue;
      // In order, each batch's reads go at the end of the asset's last chunk while it has room (in
      // place) and start a new one at 128 reads or a new month: the chunks one cut of all the reads gives.
      for (const asset of [1, 2]) {
        const cut = chunksOf(reads.filter((r) => r.assetId === asset).map((r, i) => ({ us: r.us, seq: i, locationId: r.locationId })));
        expect(await chunkLayoutOf(orgId, asset)).toEqual(cut.map((c) => [c.firstUs, c.lastUs, c.reads.length]));
      }
    }
    // The exact read-time lookups a view can use (the report at an instant): at, between and around reads.
    const { pool } = svc.service.ctx;
    const mine = reads.filter((r) => r.assetId === 1).sort((a, b) => a.us - b.us);
    for (const at of [mine[0]!.us - 1, mine[0]!.us, mine[130]!.us, mine[130]!.us + 1, mine[300]!.us - 1, mine.at(-1)!.us + 10]) {
      const expected = mine.filter((r) => r.us <= at).at(-1);
      const found = await lastReadAtOrBefore(pool, 7100, 1, at);
      expect(found && [found.us, found.locationId], String(at)).toEqual(expected ? [expected.us, expected.locationId] : null);
    }
    const between = await assetReads(pool, 7100, 1, mine[100]!.us, mine[260]!.us);
    expect(between.map((r) => r.us)).toEqual(mine.slice(100, 261).map((r) => r.us));
  });

  it('reads after the newest of each asset go at the end of its last chunk in place: no chunk is read into the process; a new chunk at 128 reads and at a new month', { timeout: 120_000 }, async () => {
    const orgId = 7150;
    // 150 reads an asset, 20 s apart, the 140th of each the first of June.
    const june = Date.UTC(2026, 5, 1) * 1000;
    const all: Read[] = [];
    for (let i = 0; i < 150; i++) for (const assetId of [1, 2, 3]) all.push({ assetId, locationId: 1 + (Math.floor(i / 30) % 2), us: june + (i - 139) * 20_000_000 + assetId });
    const rnd = random(7);
    /** Delivered a few at a time, each batch projected before the next is sent (the live shape: a projector batch of a few reads an asset). */
    const deliverSlowly = async (reads: Read[]) => {
      for (let i = 0; i < reads.length; ) {
        const size = 1 + Math.floor(rnd() * 6);
        await deliver(orgId, reads.slice(i, i + size), rnd, size);
        i += size;
      }
    };
    // The first reads make each asset's first chunk (loaded and written whole: nothing to append to).
    await deliverSlowly(all.slice(0, 3));
    const sent: string[] = [];
    await watchStatements(({ text }) => sent.push(text), () => deliverSlowly(all.slice(3, 60)));
    expect(sent.filter((text) => text.startsWith('UPDATE scan_read_chunks c')).length).toBeGreaterThan(5);
    expect(sent.filter((text) => /SELECT c\.\* FROM .* scan_read_chunks c/s.test(text))).toEqual([]);
    // On, past 128 reads an asset (the end of May), then the first read of June, then on: each time, the chunks one cut of all the reads gives.
    let from = 60;
    for (const [through, lengths] of [[137 * 3, [128, 9]], [140 * 3, [128, 11, 1]], [all.length, [128, 11, 11]]] as const) {
      await deliverSlowly(all.slice(from, through));
      from = through;
      const held = await chunkReadsOf(orgId);
      for (const asset of [1, 2, 3]) {
        const mine = all.slice(0, through).filter((r) => r.assetId === asset);
        expect(held[asset]).toEqual(mine.map((r) => [r.us, r.locationId]));
        const cut = chunksOf(mine.map((r, i) => ({ us: r.us, seq: i, locationId: r.locationId })));
        expect(cut.map((c) => c.reads.length)).toEqual(lengths);
        expect(await chunkLayoutOf(orgId, asset)).toEqual(cut.map((c) => [c.firstUs, c.lastUs, c.reads.length]));
      }
    }
    expect(await visitsOf(orgId)).toEqual(expectedVisits(all));
  });

  it('a late read just before a month boundary splits a visit that spans it; reads in years 1 and 9999 land in year partitions', { timeout: 120_000 }, async () => {
    const orgId = 7200;
    const boundary = Date.UTC(2026, 6, 1) * 1000;
    const read = (locationId: number, us: number): Read => ({ assetId: 1, locationId, us });
    await deliver(orgId, [read(1, boundary - 3_000_000), read(1, boundary - 1), read(1, boundary), read(1, boundary + 2_000_000)], () => 0.99);
    expect((await visitsOf(orgId))[1]).toEqual([[1, boundary - 3_000_000, boundary + 2_000_000]]);
    await deliver(orgId, [read(2, boundary - 2_000_000)], () => 0.99);
    expect((await visitsOf(orgId))[1]).toEqual([
      [1, boundary - 3_000_000, boundary - 3_000_000],
      [2, boundary - 2_000_000, boundary - 2_000_000],
      [1, boundary - 1, boundary + 2_000_000],
    ]);
    // And one right after it, at a third place: the visit is split on the other side too.
    await deliver(orgId, [read(3, boundary + 1_000_000)], () => 0.99);
    expect((await visitsOf(orgId))[1]!.slice(2)).toEqual([
      [1, boundary - 1, boundary],
      [3, boundary + 1_000_000, boundary + 1_000_000],
      [1, boundary + 2_000_000, boundary + 2_000_000],
    ]);
    const names = await partitionNames();
    expect(names).toEqual(expect.arrayContaining(['scan_read_chunks_m202606', 'scan_read_chunks_m202607']));

    // 0001-01-01T00:00:00Z (Date.UTC would read year 1 as 1901), and 9999-12-31T23:59:59Z: one event each, their span too wide for one.
    const far = [-62_135_596_800_000_000, -62_135_596_800_000_000 + 8, Date.UTC(9999, 11, 31, 23, 59, 59) * 1000];
    await deliver(orgId + 1, far.map((us) => ({ assetId: 2, locationId: 1, us })), () => 0, 1);
    expect((await visitsOf(orgId + 1))[2]).toEqual([[1, far[0], far[2]]]);
    expect(await partitionNames()).toEqual(expect.arrayContaining(['scan_read_chunks_y0001', 'scan_read_chunks_y9999', 'asset_visits_y9999']));
  });

  it('retention drops whole partitions only; what it keeps is untouched; a read older than the cutoff moves only the report', { timeout: 300_000 }, async () => {
    const { pool } = svc.service.ctx;
    const orgId = 7300;
    const nowUs = Date.now() * 1000;
    // One asset parked and read every few days for 200 days; another at a second place.
    const reads: Read[] = [];
    for (let day = 200; day >= 0; day -= 3) {
      reads.push({ assetId: 1, locationId: 1, us: nowUs - day * DAY_US });
      reads.push({ assetId: 2, locationId: day > 100 ? 2 : 3, us: nowUs - day * DAY_US + 7 });
    }
    await deliver(orgId, reads, random(5));
    const counts = async () =>
      (
        await pool.query<{ name: string; n: number }>(
          `SELECT c.relname AS name, (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I', c.relname), false, false, '')))[1]::text::int AS n
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent IN ('scan_read_chunks'::regclass, 'asset_visits'::regclass) ORDER BY 1`,
        )
      ).rows;
    // Rows deleted per partition, as the statistics count them (flushed within a second).
    const deletes = async (names: string[]) => {
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      await pool.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await pool.query<{ relname: string; n: string }>(
        `SELECT relname, n_tup_del::text AS n FROM pg_stat_user_tables WHERE schemaname = 'read_model' AND relname = ANY($1::text[]) ORDER BY relname`,
        [names],
      );
      return rows;
    };
    const settings = { SCAN_RETENTION_DAYS: 60, HISTORY_RETENTION_DAYS: 120 };
    const status = await retentionStatus(pool, settings);
    const partitionsBefore = await partitionNames();
    const rowsBefore = await counts();
    const deletedBefore = await deletes(partitionsBefore);
    const planned = Object.fromEntries(status.map((r) => [r.target, r.drops]));
    expect(planned.scan_read_chunks!.length).toBeGreaterThanOrEqual(3);
    expect(planned.asset_visits!.length).toBeGreaterThanOrEqual(1);
    const cutoffMs = (days: number) => Date.now() - days * 86_400_000;
    for (const name of planned.scan_read_chunks!) expect(partitionsBefore).toContain(name);

    const ran = await runRetention(pool, settings);
    expect(Object.fromEntries(ran.map((r) => [r.target, r.drops]))).toEqual(planned);
    const partitionsAfter = await partitionNames();
    expect(partitionsAfter).toEqual(partitionsBefore.filter((name) => !planned.scan_read_chunks!.includes(name) && !planned.asset_visits!.includes(name) && !planned.scan_read_keys!.includes(name)));
    // The partitions kept hold the same rows, and no row was deleted anywhere.
    expect(await counts()).toEqual(rowsBefore.filter((r) => partitionsAfter.includes(r.name)));
    expect(await deletes(partitionsAfter)).toEqual(deletedBefore.filter((r) => partitionsAfter.includes(r.relname)));
    // What is left starts after the cutoff (a month's partition is dropped once all of it is older).
    const oldestRead = (await chunkReadsOf(orgId))[1]![0]![0];
    expect(oldestRead / 1000).toBeGreaterThan(cutoffMs(60) - 31 * 86_400_000);
    expect(oldestRead / 1000).toBeLessThan(cutoffMs(60) + 31 * 86_400_000);
    // History shows the visits it still has; the report is unaffected.
    const visits = await visitsOf(orgId);
    expect(visits[1]).toEqual([[1, reads[0]!.us, reads.at(-2)!.us]]);
    expect(visits[2]!.at(-1)).toEqual([3, reads.find((r) => r.assetId === 2 && r.locationId === 3)!.us, reads.at(-1)!.us]);
    const report = await pool.query('SELECT asset_id, location_id FROM asset_locations WHERE org_id = $1 ORDER BY asset_id', [orgId]);
    expect(report.rows).toEqual([
      { asset_id: 1, location_id: 1 },
      { asset_id: 2, location_id: 3 },
    ]);
    // A second run drops nothing.
    expect((await runRetention(pool, settings)).every((r) => r.drops.length === 0)).toBe(true);

    // A late read after the cutoff but before the first read kept, inside a visit that began
    // before the cutoff: at the visit's place it joins it; elsewhere it cuts it (down to its first read).
    const { rows: cutRows } = await pool.query<{ us: string }>(`SELECT (extract(epoch FROM cutoff) * 1000000)::bigint::text AS us FROM tracking_retention_cutoffs WHERE target = 'scan_read_chunks'`);
    const cutUs = Number(cutRows[0]!.us);
    const kept = await chunkReadsOf(orgId);
    expect(kept[1]![0]![0]).toBeGreaterThan(cutUs + 1);
    expect(kept[2]![0]![0]).toBeGreaterThan(cutUs + 1);
    const visits2 = visits[2]!;
    const holding = visits2.find(([, first, last]) => first < cutUs && last > cutUs)!;
    await deliver(orgId, [{ assetId: 1, locationId: 1, us: cutUs + 1 }, { assetId: 2, locationId: 9, us: cutUs + 1 }], () => 0.99);
    const joined = await visitsOf(orgId);
    expect(joined[1]).toEqual(visits[1]);
    expect(joined[2]).toEqual([
      ...visits2.filter((v) => v[1] < holding[1]),
      [holding[0], holding[1], holding[1]],
      [9, cutUs + 1, cutUs + 1],
      [holding[0], kept[2]![0]![0], holding[2]],
      ...visits2.filter((v) => v[1] > holding[1]),
    ]);

    // Reads observed before the cutoff: no visit and no chunk change; the newest read of an asset
    // seen only then places it in the report.
    const old = nowUs - 150 * DAY_US;
    const partitionsKept = await partitionNames();
    const visitsBefore = await visitsOf(orgId);
    const chunksBefore = await chunkReadsOf(orgId);
    await deliver(orgId, [{ assetId: 1, locationId: 5, us: old }, { assetId: 3, locationId: 6, us: old }], () => 0.99);
    expect(await visitsOf(orgId)).toEqual(visitsBefore);
    expect(await chunkReadsOf(orgId)).toEqual(chunksBefore);
    const placed = await pool.query<{ asset_id: number; location_id: number; last_seen: Date }>('SELECT asset_id, location_id, last_seen FROM asset_locations WHERE org_id = $1 ORDER BY asset_id', [orgId]);
    expect(placed.rows.map((r) => [r.asset_id, r.location_id])).toEqual([
      [1, 1],
      [2, 3],
      [3, 6],
    ]);
    expect(await partitionNames()).toEqual(partitionsKept);
    // Counted where an operator sees them.
    expect((await retentionStatus(pool, settings)).map((r) => [r.target, r.aged_reads])).toEqual([
      ['scan_read_chunks', 2],
      ['asset_visits', 0],
      ['scan_read_keys', null],
    ]);
  });

  it('`retention status --json` and `retention run`: one row per table', { timeout: 120_000 }, async () => {
    const cli = (...args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile(
          TSX,
          ['services/cli/main.ts', ...args],
          { cwd: ROOT, env: { ...process.env, DATABASE_URL: svc.db.url, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1', SCAN_RETENTION_DAYS: '30', HISTORY_RETENTION_DAYS: 'unlimited', ARCHIVE_DIR: path.join(os.tmpdir(), `no-archive-${process.pid}`) }, timeout: 60_000 },
          (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
        );
      });
    const status = await cli('retention', 'status', '--json');
    expect(status.stderr).toBe('');
    const rows = JSON.parse(status.stdout) as Array<{ target: string; kept: string; drops: string[] }>;
    expect(rows.map((r) => [r.target, r.kept])).toEqual([
      ['scan_read_chunks', '30 days'],
      ['asset_visits', 'unlimited'],
      ['scan_read_keys', '7 days of the log'],
      ['event_store.events (scans)', '30 days in the log, then in the archive'],
    ]);
    expect(rows[1]!.drops).toEqual([]);
    // Every scan here was recorded today: nothing moves, and the archive's directory is not even made.
    expect(rows[3]!.drops).toEqual([]);
    const text = await cli('retention', 'run');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^target\s+kept\s+partitions/);
    expect(text.stdout).toContain('scan_read_chunks');
    expect(text.stdout).toContain('event_store.events (scans)');
    await expect(fs.stat(path.join(os.tmpdir(), `no-archive-${process.pid}`))).rejects.toThrow('ENOENT');
  });
});
