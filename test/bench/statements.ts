import type pg from 'pg';

/**
 * `npm run bench -- --statements`: pg_stat_statements is loaded, and a bench can print where the
 * server's time went in one of its phases (then counting starts again), or the module's runner
 * prints it for the whole module. Without `--statements` these do nothing.
 */

async function loaded(pool: pg.Pool): Promise<boolean> {
  return (await pool.query(`SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'`)).rowCount === 1;
}

/** Counting starts again from here (at the start of a phase): statements, and the tables' row counters. */
export async function resetStatements(pool: pg.Pool): Promise<void> {
  if (!(await loaded(pool))) return;
  await pool.query('SELECT pg_stat_statements_reset()');
  await pool.query('SELECT pg_stat_reset()');
}

/**
 * The tables most written since the last reset: rows inserted, updated (and the share of those
 * updated in place, HOT: no index written, the cheap kind) and deleted. The counters reach the
 * view within the stats interval: read after a pause.
 */
async function printTableWrites(pool: pg.Pool): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const { rows } = await pool.query<{ relname: string; ins: string; upd: string; hot: string | null; del: string }>(
    `SELECT relname, n_tup_ins::text AS ins, n_tup_upd::text AS upd, round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0))::text AS hot, n_tup_del::text AS del
       FROM pg_stat_user_tables ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC LIMIT 12`,
  );
  console.error('  tables by rows written: inserted | updated (HOT %) | deleted | table');
  for (const r of rows) console.error(`  ${r.ins} | ${r.upd} (${r.hot ?? '-'} %) | ${r.del} | ${r.relname}`);
}

/** The statements of this database by total execution time since the last reset, on stderr; then a reset. */
export async function printStatements(pool: pg.Pool, phase: string): Promise<void> {
  if (!(await loaded(pool))) return;
  const { rows } = await pool.query<{ total_ms: string; calls: string; mean_ms: string; rows: string; share: string; query: string }>(
    `SELECT round(s.total_exec_time)::text AS total_ms, s.calls::text, round(s.mean_exec_time::numeric, 3)::text AS mean_ms, s.rows::text,
            round(100 * s.total_exec_time / nullif(sum(s.total_exec_time) OVER (), 0))::text AS share,
            regexp_replace(s.query, '\\s+', ' ', 'g') AS query
       FROM pg_stat_statements s WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY s.total_exec_time DESC LIMIT 15`,
  );
  console.error(`${phase}: statements by total execution time (pg_stat_statements)`);
  console.error('  total ms | share | calls | mean ms | rows | statement');
  for (const r of rows) console.error(`  ${r.total_ms} | ${r.share}% | ${r.calls} | ${r.mean_ms} | ${r.rows} | ${r.query.slice(0, 200)}`);
  await printTableWrites(pool);
  await resetStatements(pool);
}
