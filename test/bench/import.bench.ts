/**
 * Import of assets (docs/api.md, "Import"; docs/benchmarks.md, "Import of assets (issue 33)"): a CSV of BENCH_IMPORT_ROWS
 * new assets (100,000 by default, each with one barcode tag) posted to the running service, timed
 * from the POST to the job's `succeeded` (every row applied and projected). The baseline, in the
 * same run, appends the very events the import appended (read back from the log, grouped as they
 * were appended) straight through the event-store port, at the same concurrency, onto streams of
 * their own. Target: ≥ 2,000 rows/s and ≥ 25 % of the baseline.
 */
import { randomBytes } from 'node:crypto';
import type { EventStore, RecordedEvent, StreamAppend } from '../../shared/event-store/port.js';
import { startService } from '../../services/service.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { postgresCpuUs, postmasterOf } from './proc.js';
import type { BenchContext, BenchRow } from './types.js';

const ROWS = Number(process.env.BENCH_IMPORT_ROWS ?? 100_000);
const CONCURRENCY = 16;

/** CPU seconds so far of this process (the service runs in it) and of the bench's Postgres server. */
function cpuSeconds(postmaster: number): { service: number; postgres: number } {
  const own = process.cpuUsage();
  return { service: (own.user + own.system) / 1e6, postgres: postgresCpuUs(postmaster) / 1e6 };
}

function cpuLine(label: string, before: { service: number; postgres: number }, after: { service: number; postgres: number }): string {
  return `${label} CPU: service ${(after.service - before.service).toFixed(1)} s, postgres ${(after.postgres - before.postgres).toFixed(1)} s`;
}

async function appendConcurrently(store: EventStore, groups: StreamAppend[][]): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < groups.length) await store.appendToStreams(groups[next++]!);
    }),
  );
}

/** The org's events in log order, grouped by the append that wrote them, each onto a stream of its own. */
async function appendsOf(store: EventStore, orgId: number): Promise<StreamAppend[][]> {
  const groups = new Map<bigint, RecordedEvent[]>();
  let after;
  for (;;) {
    const batch = await store.readAll({ after, maxCount: 10_000 });
    if (batch.length === 0) break;
    for (const event of batch) {
      if ((event.data as { org_id?: number }).org_id !== orgId) continue;
      const group = groups.get(event.position.commit) ?? [];
      group.push(event);
      groups.set(event.position.commit, group);
    }
    after = batch[batch.length - 1]!.position;
  }
  return [...groups.values()].map((events) => {
    const byStream = new Map<string, StreamAppend>();
    for (const event of events) {
      const streamId = `${event.streamId}-baseline`;
      const append = byStream.get(streamId) ?? { streamId, expectedRevision: 'any' as const, events: [] };
      append.events.push({ type: event.type, data: event.data, metadata: event.metadata });
      byStream.set(streamId, append);
    }
    return [...byStream.values()];
  });
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const config = loadConfig({ PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', ROLES: 'api,projector', LOG_LEVEL: 'warn', DATABASE_URL: bench.url, SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
  const service = await startService(config, bench.url, createLogger('warn'));
  try {
    const ctx = service.ctx;
    const org = await createOrg(ctx, 'Import bench');
    const { token } = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
    const stamp = Date.now().toString(36);
    const lines = ['external_key,name,description,tags'];
    for (let i = 0; i < ROWS; i++) lines.push(`IMP-${stamp}-${i},Asset ${i},imported by the bench,barcode:IMP-${stamp}-${i}`);
    const file = `${lines.join('\r\n')}\r\n`;
    bench.log(`import: ${ROWS} rows, ${(file.length / 1024 / 1024).toFixed(1)} MiB`);

    const { rows: backend } = await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const postmaster = postmasterOf(backend[0]!.pid);
    const cpuBefore = cpuSeconds(postmaster);
    const started = performance.now();
    const posted = await fetch(`${service.urls.api}/imports?resource=assets`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/csv' }, body: file });
    const { data } = (await posted.json()) as { data: { id: number } };
    let job: { status: string; created: number; rejected: number; rows: number };
    for (;;) {
      const reply = await fetch(`${service.urls.api}/imports/${data.id}`, { headers: { authorization: `Bearer ${token}` } });
      job = ((await reply.json()) as { data: typeof job }).data;
      if (job.status === 'succeeded' || job.status === 'failed') break;
      if (process.env.BENCH_IMPORT_TRACE) bench.log(`import: ${((performance.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(job).slice(0, 160)}`);
      await new Promise((r) => setTimeout(r, process.env.BENCH_IMPORT_TRACE ? 2000 : 100));
    }
    const seconds = (performance.now() - started) / 1000;
    if (job.status !== 'succeeded' || job.created !== ROWS) throw new Error(`import bench: the job ended ${JSON.stringify(job)}`);
    const cpuImported = cpuSeconds(postmaster);
    bench.log(`import: ${ROWS} rows in ${seconds.toFixed(1)} s (${Math.round(ROWS / seconds)} rows/s); ${cpuLine('import', cpuBefore, cpuImported)}`);

    const groups = await appendsOf(ctx.store, org.id);
    const events = groups.reduce((sum, g) => sum + g.reduce((s, a) => s + a.events.length, 0), 0);
    bench.log(`import: ${groups.length} appends of ${events} events to replay as the baseline`);
    const cpuBaseline = cpuSeconds(postmaster);
    const baselineStarted = performance.now();
    await appendConcurrently(ctx.store, groups);
    const baselineSeconds = (performance.now() - baselineStarted) / 1000;
    bench.log(`import: baseline in ${baselineSeconds.toFixed(1)} s (${Math.round(ROWS / baselineSeconds)} rows/s); ${cpuLine('baseline', cpuBaseline, cpuSeconds(postmaster))}`);

    const rate = ROWS / seconds;
    const baselineRate = ROWS / baselineSeconds;
    return [
      {
        bench: 'import',
        case: `POST /imports, ${ROWS} new assets with a tag each (CSV), until succeeded`,
        events: ROWS,
        seconds,
        baseline: { label: `the same ${events} events appended through the port, ${CONCURRENCY} at once`, events: ROWS, seconds: baselineSeconds },
        target: { label: '>= 2,000 rows/s and >= 25% of the baseline', met: rate >= 2000 && rate >= 0.25 * baselineRate },
      },
    ];
  } finally {
    await service.stop();
  }
}
