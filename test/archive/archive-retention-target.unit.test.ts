import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ARCHIVE_TARGET, scanArchiveTarget } from '../../services/cli/archive-retention.js';

/** docs/cli.md "retention": with KurrentDB the archive's row says so, and neither status nor run touches the database. */
describe('the scan archive retention target with another event store', () => {
  it('says the archive is for the Postgres event store only, and moves nothing', async () => {
    const untouched = { query: () => Promise.reject(new Error('the database was asked')), connect: () => Promise.reject(new Error('the database was asked')) } as unknown as pg.Pool;
    const target = scanArchiveTarget({ EVENT_STORE: 'kurrentdb', SCAN_RETENTION_DAYS: 1, dir: 'archive' });
    expect(target.name).toBe(ARCHIVE_TARGET);
    for (const row of [await target.status(untouched, Date.now()), await target.run(untouched, Date.now())]) {
      expect(row).toMatchObject({ target: ARCHIVE_TARGET, cutoff: null, partitions: 0, bytes: 0, drops: [], drop_bytes: 0, aged_reads: null });
      expect(row.holds).toContain('the scan archive is for the Postgres event store only; nothing moves');
    }
  });
});
