import type { CliContext, CommandModule } from '../registry.js';

const COLUMNS = ['target', 'kept', 'partitions', 'size', 'from', 'to', 'cutoff', 'drops', 'drop_size', 'aged_reads'];

const LEGEND = [
  'target      the table; what it holds:',
  '              scan_read_chunks  per-read detail (SCAN_RETENTION_DAYS)',
  '              asset_visits      visits, the history (HISTORY_RETENTION_DAYS)',
  '              scan_read_keys    keys of recent reads, to count a read once',
  '              event_store.events (scans)  the log\'s scan events: those',
  '                recorded before the cutoff (SCAN_RETENTION_DAYS) move into',
  '                the scan archive at ARCHIVE_DIR (Postgres event store only)',
  'partitions  how many it has, and their size; from/to: the span they cover',
  '            (scans: the archive\'s segment files, their size on disk, and',
  '            the recording times they span)',
  'cutoff      what lies wholly before it goes (whole partitions only)',
  'drops       the partitions a run drops (status) or dropped (run); scans:',
  '            `<n> scan events` it moves or moved, drop_size their size in',
  '            the log',
  'aged_reads  reads observed before a past cutoff that arrived since: they',
  '            moved only the report (per-read detail and visits were gone)',
].join('\n');

const megabytes = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

async function retention(ctx: CliContext, run: boolean): Promise<void> {
  const [{ retentionTargets }, { scanArchiveTarget }, { archiveDir }] = await Promise.all([
    import('../../../projections/tracking/retention.js'),
    import('../archive-retention.js'),
    import('../../../shared/config.js'),
  ]);
  const config = ctx.config();
  const pool = await ctx.pool();
  // The read models' tables, then the log's scan events: the archive last, so a run's drops are done before it moves events.
  const targets = [...retentionTargets(config), scanArchiveTarget({ ...config, dir: archiveDir(config) })];
  const nowMs = Date.now();
  const rows = [];
  for (const target of targets) rows.push(await (run ? target.run(pool, nowMs) : target.status(pool, nowMs)));
  if (ctx.out.json) return ctx.out.print(rows);
  ctx.out.print(
    rows.map((r) => ({ ...r, size: megabytes(r.bytes), drop_size: megabytes(r.drop_bytes), drops: r.drops.length === 0 ? '-' : r.drops.join(' '), aged_reads: r.aged_reads ?? '-' })),
    COLUMNS,
  );
  ctx.out.note(`\n${LEGEND}`);
}

/** Retention of the tracking read models and of the log's scan events (docs/cli.md "retention"). */
export default {
  groups: { retention: 'what the tracking read models and the log keep, and dropping or archiving what is older' },
  commands: [
    {
      path: ['retention', 'status'],
      summary: 'per table: what it holds, and what the next run drops or archives',
      description:
        "Tables are partitioned by time; a run drops only whole partitions older than the retention (SCAN_RETENTION_DAYS for per-read detail, HISTORY_RETENTION_DAYS for visits), and moves the log's scan events recorded before now - SCAN_RETENTION_DAYS into the scan archive (ARCHIVE_DIR). Changes nothing.",
      details: LEGEND,
      examples: ['npx tracking retention status', 'npx tracking retention status --json'],
      async run(_input, ctx) {
        await retention(ctx, false);
      },
    },
    {
      path: ['retention', 'run'],
      summary: 'drop the partitions older than the retention, archive the old scan events; per table, what went',
      description:
        "Each table in one short transaction: its old partitions are dropped whole (no row is deleted one by one). Then the log's scan events recorded before now - SCAN_RETENTION_DAYS move into the scan archive (ARCHIVE_DIR), one segment file and one transaction at a time; safe to kill and run again. The report of current locations is never cut. Run it daily, e.g. from cron.",
      details: LEGEND,
      examples: ['npx tracking retention run', 'SCAN_RETENTION_DAYS=30 npx tracking retention run --json'],
      async run(_input, ctx) {
        await retention(ctx, true);
      },
    },
  ],
} satisfies CommandModule;
