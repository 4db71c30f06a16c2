/**
 * The load generator of an HTTP bench case, in a process of its own: the service process then
 * spends its CPU on the service alone, so that CPU per request can be read off /proc. Started by
 * a bench with one argument, a JSON LoadSpec; prints `started` when the load begins and then one
 * line of JSON (LoadResult) when it ends.
 */
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';

export interface LoadSpec {
  url: string;
  method?: 'GET' | 'POST' | 'PATCH';
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  seconds: number;
  /** Handheld submissions (POST /ingest/v1/scans), each with a fresh submission_id, at these locations in turn. */
  handheld?: { locations: Array<{ id: number; tags: string[] }> };
  /**
   * Requests taken in turn instead of `url`'s path and `body` (a path under `url`'s origin), each
   * `{{n}}` of a body replaced by a number that grows with every request (names that differ, so
   * that no patch is a no-op).
   */
  rotate?: Array<{ path: string; body?: string }>;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** CPU of this process (the load generator), microseconds. */
  cpuUs: number;
}

/** A submission of one read of each of the location's tags, observed now (a microsecond apart). */
function handheldBody(location: { id: number; tags: string[] }): string {
  const nowMs = Date.now();
  const at = new Date(nowMs).toISOString().slice(0, -1); // …T14:38:11.176
  return JSON.stringify({
    submission_id: randomUUID(),
    device_id: 'bench-handheld',
    location: { id: location.id },
    reads: location.tags.map((value, i) => ({ tag_type: 'rfid', value, observed_at: `${at}${String(i).padStart(3, '0')}Z`, rssi: -55 })),
  });
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2]!) as LoadSpec;
  const options: autocannon.Options = {
    url: spec.url,
    method: spec.method ?? 'GET',
    headers: spec.headers ?? {},
    connections: spec.connections,
    duration: spec.seconds,
    ...(spec.body !== undefined ? { body: spec.body } : {}),
  };
  const plan = spec.handheld;
  if (plan) {
    let next = 0;
    options.requests = [
      {
        setupRequest: (request) => ({ ...request, body: handheldBody(plan.locations[next++ % plan.locations.length]!) }),
      },
    ];
  }
  const rotate = spec.rotate;
  if (rotate) {
    let next = 0;
    options.requests = [
      {
        setupRequest: (request) => {
          const n = next++;
          const { path, body } = rotate[n % rotate.length]!;
          return { ...request, path, ...(body !== undefined ? { body: body.replaceAll('{{n}}', String(n)) } : {}) };
        },
      },
    ];
  }
  const cpu0 = process.cpuUsage();
  process.stdout.write('started\n');
  const result = await autocannon(options);
  const cpu = process.cpuUsage(cpu0);
  const out: LoadResult = {
    requests: result.requests.total,
    seconds: result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    cpuUs: cpu.user + cpu.system,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

await main();
