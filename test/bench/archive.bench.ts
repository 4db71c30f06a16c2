/**
 * The scan archive (docs/design.md "The scan archive") at size: BENCH_ARCHIVE_READS reads (default
 * 1,000,000, BENCH_ARCHIVE_READS_PER_EVENT per scan event, default 2, as the replay bench), appended
 * straight to the store with master data in between (test/archive/scan-log.ts). In one run:
 *
 * - `projections rebuild` of every projection from the store's log alone (in this process): the baseline;
 * - an archive run of everything (the cutoff after the last append): events/s, MB/s of the table's
 *   rows moved, and the segment files' size next to those rows' heap bytes and to the space the
 *   table and its indexes give back (after VACUUM FULL, which only the bench runs);
 * - the same rebuild from archive and log, and whether it built the same tables (an MD5 per table).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { allProjections } from '../../projections/index.js';
import { archiveScanEvents, archiveStatus } from '../../shared/archive/scan-archive.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { rebuildProjections } from '../../shared/projection/rebuild.js';
import { appendScanLog } from '../archive/scan-log.js';
import type { BenchContext, BenchRow } from './types.js';

const READS = Number(process.env.BENCH_ARCHIVE_READS ?? 1_000_000);
const READS_PER_EVENT = Number(process.env.BENCH_ARCHIVE_READS_PER_EVENT ?? 2);

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const { pool } = bench;
  const store = new PostgresEventStore(pool, bench.url);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-archive-'));
  const projections = allProjections();
  const tables = projections.flatMap((p) => p.tables);
  const log = createLogger('warn');
  const rebuild = (archiveDir: string) => rebuildProjections({ store, pool, log, projections, archiveDir });
  const digest = async () => {
    const sums: Record<string, string> = {};
    for (const table of tables) {
      const { rows } = await pool.query<{ md5: string }>(`SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t), '')) AS md5 FROM read_model."${table}" t`);
      sums[table] = rows[0]!.md5;
    }
    return sums;
  };
  const relationBytes = async () =>
    Number((await pool.query<{ n: string }>(`SELECT pg_total_relation_size('event_store.events')::text AS n`)).rows[0]!.n);
  try {
    const scanEvents = Math.ceil(READS / READS_PER_EVENT);
    bench.log(`appending ${scanEvents} scan events (${READS_PER_EVENT} reads each) with master data between …`);
    const appended = await appendScanLog(store, {
      orgId: 1,
      firstId: 1,
      locations: Math.max(10, Math.round(scanEvents / 500)),
      assets: Math.max(50, Math.round(scanEvents / 100)),
      scanEvents,
      readsPerEvent: READS_PER_EVENT,
      perAppend: 100,
      masterEvery: 10,
      onProgress: (n) => {
        if (n % 100_000 === 0) bench.log(`  ${n} scan events appended`);
      },
    });
    const cutoff = new Date(Date.now() + 1000);
    await pool.query('VACUUM ANALYZE event_store.events');

    bench.log('rebuilding every projection from the event log …');
    const fromLog = await rebuild(dir);
    const before = await digest();

    const names = projections.map((p) => p.name);
    const planned = (await archiveStatus({ pool, dir, projections: names, olderThan: cutoff })).next!;
    const tableBefore = await relationBytes();
    bench.log(`archiving ${planned.events} scan events (${mb(planned.tableBytes)} of rows in the table) …`);
    const archived = await archiveScanEvents({ pool, dir, olderThan: cutoff, projections: names });
    await pool.query('VACUUM FULL event_store.events');
    const freed = tableBefore - (await relationBytes());

    bench.log('rebuilding every projection from archive and log …');
    const fromArchive = await rebuild(dir);
    const after = await digest();
    const different = tables.filter((t) => before[t] !== after[t]);
    if (different.length > 0) throw new Error(`the rebuild from archive and log built other tables: ${different.join(', ')}`);

    const baseline = { label: 'rebuild from the event log alone', events: fromLog.events, seconds: fromLog.seconds };
    return [
      { bench: 'archive', case: `log of ${appended.reads} reads in ${appended.events} events: ${archived.events} scan events to archive`, events: archived.events, seconds: 0, quantity: mb(planned.tableBytes) },
      {
        bench: 'archive',
        case: `archive run: ${archived.segments} segments, ${mb(archived.bytes)} of files (${mb(archived.rawBytes)} uncompressed); s reading ${archived.phases.read}, encoding ${archived.phases.encode}, writing ${archived.phases.write}, deleting ${archived.phases.delete}`,
        events: archived.events,
        seconds: archived.seconds,
      },
      { bench: 'archive', case: 'archive run: table rows moved per second', events: archived.events, seconds: archived.seconds, quantity: `${(planned.tableBytes / 1e6 / archived.seconds).toFixed(1)} MB/s` },
      { bench: 'archive', case: 'segment bytes per heap byte of the rows moved', events: archived.events, seconds: 0, quantity: (archived.bytes / planned.tableBytes).toFixed(3) },
      { bench: 'archive', case: `segment bytes per byte freed in the table and its indexes (after VACUUM FULL: ${mb(freed)})`, events: archived.events, seconds: 0, quantity: (archived.bytes / freed).toFixed(3) },
      { bench: 'archive', case: 'segment bytes per archived read', events: READS, seconds: 0, quantity: `${(archived.bytes / (archived.events * READS_PER_EVENT)).toFixed(2)} B/read` },
      {
        bench: 'archive',
        case: 'projections rebuild from archive and log (same tables: yes)',
        events: fromArchive.events,
        seconds: fromArchive.seconds,
        baseline,
        target: { label: '>= 80% of the rebuild from the log alone', met: fromArchive.events / fromArchive.seconds >= 0.8 * (fromLog.events / fromLog.seconds) },
      },
    ];
  } finally {
    await store.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
}
