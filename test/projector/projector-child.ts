/**
 * A projector process for the kill test: runs the counter projection with ProjectorRuntime on
 * DATABASE_URL until SIGTERM. With HOLD_AT_BATCH=n it stops inside the n-th batch's transaction,
 * after its writes and before its checkpoint, prints `holding` and waits to be killed.
 * Prints `checkpoint <position>` after every committed batch. LEASE_MS: its lease on the projection.
 */
import { createPool } from '../../shared/db/pool.js';
import { formatPosition } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { counterProjection } from './counter-projection.js';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL is required');
const holdAt = Number(process.env.HOLD_AT_BATCH ?? 0);
// SLEEP_AT_BATCH=n: inside the n-th batch's transaction, a statement of SLEEP_SECONDS (the backend busy, not idle), after `holding`.
const sleepAt = Number(process.env.SLEEP_AT_BATCH ?? 0);

const pool = createPool(url, { max: 4, applicationName: 'projector-child' });
const store = new PostgresEventStore(pool, url, { pollIntervalMs: 50 });
let batches = 0;
const projection = counterProjection({
  name: process.env.PROJECTION ?? 'kill_counter',
  table: process.env.TABLE ?? 'kill_counters',
  async afterWrites(_events, tx) {
    batches++;
    if (batches === sleepAt) {
      process.stdout.write('holding\n');
      await tx.query('SELECT pg_sleep($1)', [Number(process.env.SLEEP_SECONDS ?? 4)]);
    }
    if (batches === holdAt) {
      process.stdout.write('holding\n');
      await new Promise(() => undefined); // until SIGKILL
    }
  },
});
const runtime = new ProjectorRuntime({
  store,
  pool,
  projections: [projection],
  log: createLogger('silent'),
  batchSize: Number(process.env.BATCH_SIZE ?? 200),
  takeoverIntervalMs: 100,
  leaseMs: Number(process.env.LEASE_MS ?? 10_000),
  onCheckpoint: (_name, position) => process.stdout.write(`checkpoint ${formatPosition(position)}\n`),
});
runtime.start();
process.stdout.write('started\n');
process.once('SIGTERM', () => {
  void (async () => {
    await runtime.stop();
    await store.close();
    await pool.end();
    process.exit(0);
  })();
});
