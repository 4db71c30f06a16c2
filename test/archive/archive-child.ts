/**
 * An archive run in a process of its own, for the kill -9 tests (archive-kill.int.test.ts):
 * `archiveScanEvents` on DATABASE_URL into ARCHIVE_DIR, of the events recorded before OLDER_THAN,
 * in segments of SEGMENT_EVENTS events, bounded by the checkpoints of PROJECTIONS (comma list).
 * With KILL_AT=<step> and KILL_SEGMENT=n it kills itself (SIGKILL, nothing cleaned up) at that
 * step of its n-th segment. Prints `step <step> <file>` at each step and `done <result>` at the end.
 */
import { archiveScanEvents, type ArchiveStep } from '../../shared/archive/scan-archive.js';
import { createPool } from '../../shared/db/pool.js';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL is required');
const killAt = process.env.KILL_AT as ArchiveStep | undefined;
const killSegment = Number(process.env.KILL_SEGMENT ?? 1);
const pool = createPool(url, { max: 2, applicationName: 'archive-child' });
let segment = 0;
const result = await archiveScanEvents({
  pool,
  dir: process.env.ARCHIVE_DIR!,
  olderThan: new Date(process.env.OLDER_THAN!),
  projections: (process.env.PROJECTIONS ?? '').split(',').filter(Boolean),
  maxSegmentEvents: Number(process.env.SEGMENT_EVENTS ?? 100),
  onStep(step, file) {
    if (step === 'segment-temp-written') segment++;
    process.stdout.write(`step ${step} ${file}\n`);
    if (step === killAt && segment === killSegment) process.kill(process.pid, 'SIGKILL');
  },
});
process.stdout.write(`done ${JSON.stringify(result)}\n`);
await pool.end();
