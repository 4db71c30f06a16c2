/**
 * The three walks of issue 26, measured rather than read: which of the project's files (and
 * folders) run code to carry one request through the service.
 *
 *   node --import tsx test/layout/walks/measure.ts [<checkout>]
 *
 * It starts `<checkout>` (default: this one) as `npm start` does, all roles in one process on an
 * embedded Postgres in a temporary DATA_DIR, with a real Kafka broker, and the probe preloaded
 * (probe.mjs: V8's precise coverage, call counts per function). For each walk it first does the
 * same walk once on other data (first-use code: connections, prepared statements, lazy imports),
 * then records three quiet intervals of the same length (what runs anyway: timers, polls, heartbeats),
 * then the walk. A file is on the walk when at least one of its functions ran during the walk and
 * not in the quiet intervals; node_modules are not counted. A poll that happens to carry the walk
 * (the projector reading the new event) counts only through the functions it calls that quiet
 * polls do not, so the figures are a floor.
 *
 * The walks: a Kafka read to the asset-location report row; a PATCH re-parenting a location, to
 * its answer; a handheld submission, to its report row.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { startPrivateKafkaBroker } from '../../support/kafka-broker.js';
import { freePorts } from '../../support/ports.js';

const run = promisify(execFile);
const checkout = path.resolve(process.argv[2] ?? fileURLToPath(new URL('../../..', import.meta.url)));
const probe = fileURLToPath(new URL('./probe.mjs', import.meta.url));
const WALK_MS = 3_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const broker = await startPrivateKafkaBroker();
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'walks-'));
const [port, ingestPort, opsPort] = await freePorts(3);
const env = {
  ...process.env,
  DATA_DIR: dataDir,
  PORT: String(port),
  INGEST_PORT: String(ingestPort),
  OPS_PORT: String(opsPort),
  KAFKA_BROKERS: broker.brokers,
  LOG_LEVEL: 'warn',
  WALK_PROBE_OUT: path.join(dataDir, 'calls'),
};
let service: ChildProcess | null = null;

type Json = Record<string, unknown> & { id: number; token: string; data: Row[] };
type Row = Record<string, unknown>;

async function cli(...args: string[]): Promise<Json> {
  const { stdout } = await run('node', ['bin/tracking.js', ...args, '--json'], { cwd: checkout, env });
  return JSON.parse(stdout);
}

async function api(method: string, url: string, token: string, body?: unknown): Promise<Json> {
  const response = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${text}`);
  return (text ? JSON.parse(text) : {}) as Json;
}

let taken = 0;
async function calls(): Promise<Map<string, Set<string>>> {
  const file = `${env.WALK_PROBE_OUT}.${taken++}.json`;
  service!.kill('SIGUSR2');
  for (let i = 0; i < 200 && !fs.existsSync(file); i++) await sleep(25);
  await sleep(100);
  const scripts = JSON.parse(fs.readFileSync(file, 'utf8')) as { url: string; functions: string[] }[];
  return new Map(scripts.map((s) => [path.relative(checkout, fileURLToPath(s.url)), new Set(s.functions)]));
}

/** The files (and folders) that ran for `walk` and not in a quiet interval as long. */
async function measure(name: string, walk: (round: number) => Promise<void>, check: () => Promise<void>) {
  await walk(0);
  await sleep(WALK_MS);
  await calls();
  // Three quiet intervals: a timer slower than one (the database probe runs every 5 s) still shows.
  const quiet = new Map<string, Set<string>>();
  for (let i = 0; i < 3; i++) {
    await sleep(WALK_MS);
    for (const [file, functions] of await calls()) quiet.set(file, new Set([...(quiet.get(file) ?? []), ...functions]));
  }
  const started = Date.now();
  await walk(1);
  await sleep(Math.max(0, WALK_MS - (Date.now() - started)));
  const walked = await calls();
  await check();
  const files = [...walked]
    .filter(([file, functions]) => !file.startsWith('..') && [...functions].some((f) => !quiet.get(file)?.has(f)))
    .map(([file]) => file)
    .sort();
  const folders = new Set(files.map((f) => path.dirname(f)));
  console.log(`\n${name}: ${files.length} files in ${folders.size} folders`);
  for (const file of files) console.log(`  ${file}`);
  return { name, files: files.length, folders: folders.size };
}

try {
  const admin = new Kafka({ brokers: broker.brokers.split(','), logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: 'scans.fixed', numPartitions: 3 }, { topic: 'scans.fixed.dlq', numPartitions: 1 }] });
  await admin.disconnect();
  const org = await cli('orgs', 'create', '--name', 'Walks');
  const key = await cli('keys', 'mint', '--org', String(org.id), '--name', 'walks', '--scopes', 'assets:read,assets:write,locations:read,locations:write,tracking:read');
  const ingestKey = await cli('keys', 'mint', '--org', String(org.id), '--name', 'handheld', '--scopes', 'scans:write');
  await run('bash', ['-c', `exec node --import ${JSON.stringify(probe)} --import tsx services/main.ts > ${JSON.stringify(path.join(dataDir, 'service.log'))} 2>&1 & echo $! > ${JSON.stringify(path.join(dataDir, 'service.pid'))}`], { cwd: checkout, env });
  const pid = Number(fs.readFileSync(path.join(dataDir, 'service.pid'), 'utf8'));
  service = { kill: (signal: NodeJS.Signals) => process.kill(pid, signal) } as unknown as ChildProcess;
  const base = `http://127.0.0.1:${port}/api/v1`;
  for (let i = 0; ; i++) {
    if ((await fetch(`http://127.0.0.1:${opsPort}/readyz`).catch(() => null))?.status === 200) break;
    if (i > 600) throw new Error(`the service did not become ready: ${fs.readFileSync(path.join(dataDir, 'service.log'), 'utf8')}`);
    await sleep(100);
  }
  const producer = new Kafka({ brokers: broker.brokers.split(','), logLevel: logLevel.NOTHING }).producer();
  await producer.connect();

  await api('POST', `${base}/locations`, key.token, { external_key: 'SITE', name: 'Site' });
  for (const n of [0, 1]) {
    await api('POST', `${base}/locations`, key.token, { external_key: `DOCK-${n}`, name: `Dock ${n}`, parent_external_key: 'SITE' });
    await api('POST', `${base}/locations`, key.token, { external_key: `AISLE-${n}`, name: `Aisle ${n}` });
    await api('POST', `${base}/assets`, key.token, { external_key: `FORKLIFT-${n}`, name: `Forklift ${n}`, tags: [{ tag_type: 'rfid', value: `E2800000000000000000000${n}` }] });
    await api('POST', `${base}/assets`, key.token, { external_key: `PALLET-${n}`, name: `Pallet ${n}`, tags: [{ tag_type: 'barcode', value: `SN-${n}` }] });
    await cli('readers', 'register', '--org', String(org.id), '--reader', `dock-door-${n}`);
    await cli('scan-points', 'assign', '--org', String(org.id), '--reader', `dock-door-${n}`, '--capture-point', `dock-door-${n}-1`, '--location', `DOCK-${n}`);
  }
  const placed = async (asset: string, location: string) => {
    const report = await api('GET', `${base}/reports/asset-locations?asset_external_key=${asset}`, key.token);
    const row = report.data.find((r) => r.asset_external_key === asset);
    const at = row?.location_external_key;
    if (at !== location) throw new Error(`${asset} is not at ${location}: ${JSON.stringify(report.data)}`);
  };

  const results = [];
  results.push(
    await measure(
      'A Kafka read to the report row',
      async (n) => {
        const message = { reader_id: `dock-door-${n}`, reads: [{ capture_point: `dock-door-${n}-1`, tag_type: 'rfid', value: `E2800000000000000000000${n}`, observed_at: new Date().toISOString(), rssi: -60 }] };
        await producer.send({ topic: 'scans.fixed', messages: [{ key: `dock-door-${n}`, value: JSON.stringify(message) }] });
      },
      () => placed('FORKLIFT-1', 'DOCK-1'),
    ),
  );
  const aisles = await api('GET', `${base}/locations?limit=100`, key.token);
  const aisleId = (n: number) => aisles.data.find((l) => l.external_key === `AISLE-${n}`)!.id;
  results.push(
    await measure(
      'A PATCH re-parenting a location, to its answer',
      async (n) => {
        await api('PATCH', `${base}/locations/${aisleId(n)}`, key.token, { parent_external_key: `DOCK-${n}` });
      },
      async () => {
        const aisle = await api('GET', `${base}/locations/${aisleId(1)}`, key.token);
        if ((aisle.data as unknown as Row).parent_external_key !== 'DOCK-1') throw new Error(`not re-parented: ${JSON.stringify(aisle)}`);
      },
    ),
  );
  results.push(
    await measure(
      'A handheld submission to the report row',
      async (n) => {
        const response = await fetch(`http://127.0.0.1:${ingestPort}/ingest/v1/scans`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ingestKey.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ submission_id: `01JDX4A8Q0N7YV5K3M2B9C6D1${n}`, device_id: 'handheld-07', location: { external_key: `AISLE-${n}` }, reads: [{ tag_type: 'barcode', value: `SN-${n}` }] }),
        });
        if (response.status !== 202) throw new Error(`handheld: ${response.status} ${await response.text()}`);
      },
      () => placed('PALLET-1', 'AISLE-1'),
    ),
  );
  await producer.disconnect();
  console.log('\n| walk | files | folders |\n|---|---|---|');
  for (const r of results) console.log(`| ${r.name} | ${r.files} | ${r.folders} |`);
} finally {
  service?.kill('SIGTERM');
  await sleep(2_000);
  await broker.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
