/**
 * Event store throughput next to raw SQL on the same table, in the same run:
 * - single-event appends and appends of 100-event batches (concurrent writers) vs plain INSERTs;
 * - reading the global log in batches of 1000 vs a plain keyset SELECT of the same rows.
 * Each pair runs in alternating rounds and reports the median round, so that a burst of other load
 * on the machine hits both sides alike. And (issue 37):
 * - first, on the module's fresh database (never analyzed), BENCH_FRESH_EVENTS single-event
 *   appends (default 200,000; 8 writers): the rate of the last tenth against the first tenth
 *   (target: within 20 %), the append's plans being made on the empty log (docs/design.md
 *   "Event store (Postgres adapter)");
 * - 8 writers appending to one stream with expected revisions (a conflict: the writer takes the
 *   actual revision from the error and tries again): successful appends/s against the single-row
 *   INSERT of the same run (target: at least 50 %).
 */
import { randomUUID } from 'node:crypto';
import { createPool } from '../../shared/db/pool.js';
import { START, WrongExpectedRevisionError, type EventData } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import type { BenchContext, BenchRow } from './types.js';

const WRITERS = Number(process.env.BENCH_WRITERS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROUND_SECONDS = Number(process.env.BENCH_ROUND_SECONDS ?? 2);
const READ_EVENTS = Number(process.env.BENCH_READ_EVENTS ?? 100_000);
const READ_BATCH = 1000;
const FRESH_EVENTS = Number(process.env.BENCH_FRESH_EVENTS ?? 200_000);
const FRESH_TARGET = 0.8;
const CONTENDED_TARGET = 0.5;

const BATCHED_APPEND_TARGET = 0.5;
const READ_TARGET_PER_SECOND = 100_000;

interface Measurement {
  events: number;
  seconds: number;
}

function scanEvent(i: number): EventData {
  return {
    id: randomUUID(),
    type: 'ScanRecorded',
    data: {
      assetId: 1000 + (i % 5000),
      readerId: `reader-${i % 50}`,
      capturePoint: `dock-${i % 8}`,
      tag: { type: 'epc', value: `3034257BF400B7800004${String(i).padStart(6, '0')}` },
      observedAt: new Date(1_700_000_000_000 + i * 1000).toISOString(),
      rssi: -40 - (i % 30),
    },
    metadata: { source: 'bench', correlationId: `c-${i}` },
  };
}

/** Runs `writers` loops for `seconds`; each call of `step` returns the number of events it wrote. */
async function timed(writers: number, seconds: number, step: (writer: number, iteration: number) => Promise<number>): Promise<Measurement> {
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let events = 0;
  await Promise.all(
    Array.from({ length: writers }, async (_, writer) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const written = await step(writer, i);
        events += written; // not `events += await …`: that reads `events` before the await
      }
    }),
  );
  return { events, seconds: (performance.now() - started) / 1000 };
}

const rate = (m: Measurement) => m.events / m.seconds;

function median(measurements: Measurement[]): Measurement {
  return [...measurements].sort((a, b) => rate(a) - rate(b))[Math.floor(measurements.length / 2)]!;
}

/** Alternates the baseline and the measured side, `ROUNDS` times each; returns the median round of each. */
async function pair(baseline: () => Promise<Measurement>, measured: () => Promise<Measurement>) {
  const base: Measurement[] = [];
  const ours: Measurement[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    base.push(await baseline());
    ours.push(await measured());
  }
  return { baseline: median(base), measured: median(ours) };
}

const INSERT_ONE = `INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data, metadata)
  VALUES ($1::uuid, $2, $3::bigint, $4, $5::jsonb, $6::jsonb)`;
const INSERT_MANY = `INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data, metadata)
  SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::jsonb[], $6::jsonb[])`;
const SELECT_PAGE = `SELECT tx_id::text AS commit, global_position::text AS prepare, event_id, stream_id,
    stream_revision::text AS stream_revision, type, data, metadata, recorded_at
  FROM event_store.events WHERE (tx_id, global_position) > ($1::text::xid8, $2::bigint)
  ORDER BY tx_id, global_position LIMIT ${READ_BATCH}`;

export async function run(ctx: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  // The same pool size for the store and the raw baseline.
  const storePool = createPool(ctx.url, { max: WRITERS + 2, applicationName: 'bench-store' });
  const rawPool = createPool(ctx.url, { max: WRITERS + 2, applicationName: 'bench-raw' });
  const store = new PostgresEventStore(storePool, ctx.url);
  const rawRevisions = new Map<string, number>();
  const takeRawRevisions = (stream: string, count: number) => {
    const first = rawRevisions.get(stream) ?? 0;
    rawRevisions.set(stream, first + count);
    return first;
  };
  try {
    await Promise.all(Array.from({ length: WRITERS }, () => storePool.query('SELECT 1')));
    await Promise.all(Array.from({ length: WRITERS }, () => rawPool.query('SELECT 1')));

    ctx.log(`a fresh database: ${FRESH_EVENTS} single-event appends, ${WRITERS} writers`);
    const tenth = Math.floor(FRESH_EVENTS / 10);
    const slices: number[] = [];
    let freshWritten = 0;
    let sliceStarted = performance.now();
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => {
        for (let i = 0; freshWritten < FRESH_EVENTS; i++) {
          await store.appendToStream(`fresh-${w}-${i % 100}`, [scanEvent(i)], 'any');
          freshWritten++;
          if (freshWritten % tenth === 0) {
            slices.push((performance.now() - sliceStarted) / 1000);
            sliceStarted = performance.now();
          }
        }
      }),
    );
    rows.push({
      bench: 'event-store',
      case: `append 1 event on a fresh database (${WRITERS} writers), last tenth of ${FRESH_EVENTS.toLocaleString('en-US')} against the first (tenths: ${slices.map((t) => Math.round(tenth / t)).join(', ')}/s)`,
      events: tenth,
      seconds: slices.at(-1)!,
      baseline: { label: 'first tenth', events: tenth, seconds: slices[0]! },
      target: { label: `>= ${FRESH_TARGET * 100}% of the first tenth`, met: slices[0]! / slices.at(-1)! >= FRESH_TARGET },
    });

    ctx.log(`single-event appends, ${WRITERS} writers`);
    const single = await pair(
      () =>
        timed(WRITERS, ROUND_SECONDS, async (w, i) => {
          const e = scanEvent(i);
          const stream = `raw1-${w}-${i % 100}`;
          await rawPool.query(INSERT_ONE, [e.id, stream, takeRawRevisions(stream, 1), e.type, JSON.stringify(e.data), JSON.stringify(e.metadata)]);
          return 1;
        }),
      () =>
        timed(WRITERS, ROUND_SECONDS, async (w, i) => {
          await store.appendToStream(`single-${w}-${i % 100}`, [scanEvent(i)], 'any');
          return 1;
        }),
    );
    rows.push({
      bench: 'event-store',
      case: `append 1 event (${WRITERS} writers)`,
      ...single.measured,
      baseline: { label: 'INSERT 1 row', ...single.baseline },
    });

    ctx.log(`${WRITERS} writers appending to one stream with expected revisions`);
    let conflicts = 0;
    const contended = await pair(
      () =>
        timed(WRITERS, ROUND_SECONDS, async (w, i) => {
          const e = scanEvent(i);
          const stream = `rawc-${w}-${i % 100}`;
          await rawPool.query(INSERT_ONE, [e.id, stream, takeRawRevisions(stream, 1), e.type, JSON.stringify(e.data), JSON.stringify(e.metadata)]);
          return 1;
        }),
      (() => {
        let round = 0;
        return () => {
          const stream = `contended-${round++}`;
          let known: bigint | 'no_stream' = 'no_stream';
          return timed(WRITERS, ROUND_SECONDS, async (_, i) => {
            const expected = known;
            try {
              const result = await store.appendToStream(stream, [scanEvent(i)], expected);
              known = result.revisions.get(stream)!;
              return 1;
            } catch (error) {
              if (!(error instanceof WrongExpectedRevisionError)) throw error;
              conflicts++;
              known = error.actual;
              return 0;
            }
          });
        };
      })(),
    );
    const contendedRatio = rate(contended.measured) / rate(contended.baseline);
    rows.push({
      bench: 'event-store',
      case: `append 1 event to one stream with expected revisions (${WRITERS} writers; ${conflicts} conflicts over every round)`,
      ...contended.measured,
      baseline: { label: 'INSERT 1 row', ...contended.baseline },
      target: { label: `>= ${CONTENDED_TARGET * 100}% of raw`, met: contendedRatio >= CONTENDED_TARGET },
    });

    ctx.log(`100-event appends, ${WRITERS} writers`);
    const batched = await pair(
      () =>
        timed(WRITERS, ROUND_SECONDS, async (w, i) => {
          const events = Array.from({ length: 100 }, (_, k) => scanEvent(i * 100 + k));
          const stream = `rawb-${w}-${i % 20}`;
          const first = takeRawRevisions(stream, 100);
          await rawPool.query(INSERT_MANY, [
            events.map((e) => e.id),
            events.map(() => stream),
            events.map((_, k) => String(first + k)),
            events.map((e) => e.type),
            events.map((e) => JSON.stringify(e.data)),
            events.map((e) => JSON.stringify(e.metadata)),
          ]);
          return 100;
        }),
      () =>
        timed(WRITERS, ROUND_SECONDS, async (w, i) => {
          const events = Array.from({ length: 100 }, (_, k) => scanEvent(i * 100 + k));
          await store.appendToStream(`batch-${w}-${i % 20}`, events, 'any');
          return 100;
        }),
    );
    const batchRatio = rate(batched.measured) / rate(batched.baseline);
    rows.push({
      bench: 'event-store',
      case: `append 100-event batches (${WRITERS} writers)`,
      ...batched.measured,
      baseline: { label: 'INSERT 100 rows', ...batched.baseline },
      target: { label: `>= ${BATCHED_APPEND_TARGET * 100}% of raw`, met: batchRatio >= BATCHED_APPEND_TARGET },
    });

    // Top the log up to READ_EVENTS events, then read that many.
    const { rows: counted } = await rawPool.query<{ n: number }>('SELECT count(*)::int AS n FROM event_store.events');
    const missing = READ_EVENTS - counted[0]!.n;
    if (missing > 0) ctx.log(`filling the log with ${missing} events`);
    for (let done = 0; done < missing; done += 1000) {
      const events = Array.from({ length: Math.min(1000, missing - done) }, (_, k) => scanEvent(done + k));
      await store.appendToStream(`fill-${done}`, events, 'no_stream');
    }
    // Settle the freshly written rows (hint bits, visibility map, statistics) so that both readers
    // measure reading, not the first reader paying for the writers' cleanup.
    // Then flush it, so that the checkpointer's writes do not land in the middle of the reads.
    await rawPool.query('VACUUM (ANALYZE) event_store.events');
    await rawPool.query('CHECKPOINT');

    ctx.log(`reading ${READ_EVENTS} events of the global log in batches of ${READ_BATCH}`);
    const reads = await pair(
      async () => {
        const started = performance.now();
        let events = 0;
        for (let commit = '0', prepare = '0'; events < READ_EVENTS; ) {
          const { rows: batch } = await rawPool.query<{ commit: string; prepare: string }>(SELECT_PAGE, [commit, prepare]);
          if (batch.length === 0) break;
          events += batch.length;
          commit = batch[batch.length - 1]!.commit;
          prepare = batch[batch.length - 1]!.prepare;
        }
        return { events, seconds: (performance.now() - started) / 1000 };
      },
      async () => {
        const started = performance.now();
        let events = 0;
        for (let after = START; events < READ_EVENTS; ) {
          const batch = await store.readAll({ after, maxCount: READ_BATCH });
          if (batch.length === 0) break;
          events += batch.length;
          after = batch[batch.length - 1]!.position;
        }
        return { events, seconds: (performance.now() - started) / 1000 };
      },
    );
    rows.push({
      bench: 'event-store',
      case: `readAll, batches of ${READ_BATCH}`,
      ...reads.measured,
      baseline: { label: `SELECT ${READ_BATCH} rows`, ...reads.baseline },
      target: {
        label: `>= ${READ_TARGET_PER_SECOND.toLocaleString('en-US')}/s`,
        met: rate(reads.measured) >= READ_TARGET_PER_SECOND,
      },
    });
  } finally {
    await store.close();
    await storePool.end();
    await rawPool.end();
  }
  return rows;
}
