import { randomUUID } from 'node:crypto';
import { kafkaBrokers } from '../../../shared/config.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import { createAsset } from '../../../shared/domain/assets/commands.js';
import { createAssetSchema } from '../../../shared/domain/assets/schema.js';
import { createAlertRule } from '../../../shared/domain/alerts/commands.js';
import { startCount } from '../../../shared/domain/counts/commands.js';
import { startCountSchema } from '../../../shared/domain/counts/schema.js';
import { createRuleSchema, type CreateRuleBody } from '../../../shared/domain/alerts/schema.js';
import { createLocation } from '../../../shared/domain/locations/commands.js';
import { createOrg, mintApiKey, type MintedApiKey } from '../../../shared/domain/orgs-and-keys/commands.js';
import { assignScanPoint, registerReader } from '../../../shared/domain/readers/commands.js';
import { START, type Position } from '../../../shared/event-store/port.js';
import type { AppendedStream } from '../../../shared/projection/checkpoints.js';
import { ingestRole } from '../../ingest/role.js';
import { createKafkaIngestClient, type KafkaIngestClient } from '../../ingest/kafka/client.js';
import { ScanConsumer } from '../../ingest/kafka/consumer.js';
import { ingestMetrics } from '../../ingest/metrics.js';
import { seededRandom as random } from '../../../shared/random.js';

/**
 * `seed demo`: a small organization to explore, built the way clients build one. Master data goes
 * through the command handlers (as the API's routes do); scans go through the real ingest paths:
 *
 * - handheld submissions over HTTP to the handheld route, on an ingest listener this command
 *   starts on an ephemeral loopback port. It is the same route and request pipeline as INGEST_PORT,
 *   so the command works the same whether `npm start` runs or not, and never posts to whatever
 *   else answers on INGEST_PORT (another installation, another database);
 * - with KAFKA_BROKERS set, fixed-reader reports published to KAFKA_SCAN_TOPIC in both payload
 *   shapes. When an ingest process consumes the topic for KAFKA_GROUP_ID (the consumer group has
 *   members: `npm start` with Kafka), it ingests them; when none does, this command runs the same
 *   consumer in-process until its reads are in, and leaves the group. (A broker that cannot
 *   describe groups: when nothing is ingested within CONSUMER_GRACE_MS, it consumes here.)
 *
 * Projections: the caller's `project` runs the projector in-process for what no other process
 * runs (a running service keeps its own). Every run makes a new organization; reader ids carry
 * its id, so two runs never claim the same reader.
 */

export const PUBLIC_SCOPES = ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'];

export interface DemoSeed {
  org_id: number;
  org_name: string;
  api_key: { id: string; token: string; scopes: string[] };
  scans_key: { id: string; token: string; scopes: string[] };
  locations: number;
  assets: number;
  readers: string[];
  /** Reads sent by each path, and the span of their observed times. */
  scans: { handheld: number; kafka: number; from: string; to: string };
}

export interface DemoOptions {
  /** Runs (or waits for) the projections up to a position (the CLI's `project`), told the streams appended. */
  project(position: Position, streams?: readonly AppendedStream[]): Promise<void>;
  /** The scans end here (default: now). */
  now?: Date;
  /** How long to wait for Kafka reads to be ingested. */
  kafkaTimeoutMs?: number;
}

interface Shelf {
  key: string;
  room: string;
}

const ROOMS: Array<{ key: string; name: string; building: 'WH' | 'WS' }> = [
  { key: 'WH-RCV', name: 'Receiving', building: 'WH' },
  { key: 'WH-STO', name: 'Storage', building: 'WH' },
  { key: 'WH-DSP', name: 'Dispatch', building: 'WH' },
  { key: 'WS-ASM', name: 'Assembly', building: 'WS' },
  { key: 'WS-TOOL', name: 'Tool room', building: 'WS' },
];

const KINDS: Array<{ prefix: string; name: string; count: number; home: string; barcode: boolean }> = [
  { prefix: 'PJ', name: 'Pallet jack', count: 4, home: 'WH-RCV', barcode: false },
  { prefix: 'BAT', name: 'Forklift battery', count: 2, home: 'WH-STO', barcode: true },
  { prefix: 'LT', name: 'Laptop', count: 6, home: 'WS-ASM', barcode: true },
  { prefix: 'TW', name: 'Torque wrench', count: 6, home: 'WS-TOOL', barcode: true },
  { prefix: 'DR', name: 'Cordless drill', count: 6, home: 'WS-TOOL', barcode: false },
  { prefix: 'HS', name: 'Handheld scanner', count: 6, home: 'WH-DSP', barcode: true },
];

interface HandheldRead {
  tag_type: 'rfid' | 'barcode';
  value: string;
  observed_at: string;
  rssi?: number;
}

interface Submission {
  location: { external_key: string } | { tag: { tag_type: string; value: string } };
  reads: HandheldRead[];
}

interface ReaderReport {
  readerId: string;
  message: Record<string, unknown>;
  reads: number;
}

export async function seedDemo(ctx: ServiceContext, options: DemoOptions): Promise<DemoSeed> {
  // The projector runs here unless a running service holds it: commands wait for their events.
  await options.project(START);
  const project = { project: options.project };
  const org = await createOrg(ctx, 'Riverside demo', project);
  const orgId = org.id;
  const rnd = random(orgId);
  const apiKey = await mintApiKey(ctx, { orgId, name: 'demo', scopes: PUBLIC_SCOPES, expiresAt: null }, project);
  const scansKey = await mintApiKey(ctx, { orgId, name: 'demo handheld backend', scopes: ['scans:write'], expiresAt: null }, project);

  // Site → buildings → rooms → shelves (each shelf has a barcode label).
  const location = (key: string, name: string, parent: string | null, tags: Array<{ tag_type: string; value: string }> = []) =>
    createLocation(ctx, orgId, {
      externalKey: key,
      name,
      description: null,
      parent: parent === null ? null : { field: 'parent_external_key', externalKey: parent },
      isActive: true,
      validFrom: null,
      validTo: null,
      tags: tags.map((t) => ({ ...t })),
    });
  let locations = 0;
  await location('SITE', 'Riverside campus', null);
  await location('WH', 'Warehouse', 'SITE');
  await location('WS', 'Workshop', 'SITE');
  locations += 3;
  const shelves: Shelf[] = [];
  for (const room of ROOMS) {
    await location(room.key, room.name, room.building);
    locations++;
    for (let n = 1; n <= 3; n++) {
      const key = `${room.key}-S${n}`;
      await location(key, `${room.name} shelf ${n}`, room.key, [{ tag_type: 'barcode', value: `LBL-${key}` }]);
      shelves.push({ key, room: room.key });
      locations++;
    }
  }

  // Assets with RFID tags (some with a barcode too), each at home on a shelf of its room.
  const assets: Array<{ key: string; epc: string; barcode: string | null; home: Shelf }> = [];
  let serial = 0;
  for (const kind of KINDS) {
    const homes = shelves.filter((s) => s.room === kind.home);
    for (let n = 1; n <= kind.count; n++) {
      serial++;
      const key = `${kind.prefix}-${String(n).padStart(2, '0')}`;
      const epc = `E28011606000${orgId.toString(16).toUpperCase().padStart(6, '0')}${String(serial).padStart(6, '0')}`;
      const barcode = kind.barcode ? `SN-${kind.prefix}-${1000 + n}` : null;
      const body = createAssetSchema.parse({
        external_key: key,
        name: `${kind.name} ${n}`,
        metadata: { kind: kind.name, purchased: `202${n % 5}-0${1 + (n % 9)}-15` },
        tags: [{ tag_type: 'rfid', value: epc }, ...(barcode ? [{ tag_type: 'barcode', value: barcode }] : [])],
      });
      await createAsset(ctx, orgId, body);
      assets.push({ key, epc, barcode, home: homes[(n - 1) % homes.length]! });
    }
  }

  // Fixed readers: a dock door (in and out) and the tool room's door.
  const dock = `demo-${orgId}-dock`;
  const toolroom = `demo-${orgId}-toolroom`;
  await registerReader(ctx, orgId, dock, project);
  await registerReader(ctx, orgId, toolroom, project);
  await assignScanPoint(ctx, { orgId, readerId: dock, capturePoint: `${dock}-in`, locationExternalKey: 'WH-RCV' }, project);
  await assignScanPoint(ctx, { orgId, readerId: dock, capturePoint: `${dock}-out`, locationExternalKey: 'WH-DSP' }, project);
  await assignScanPoint(ctx, { orgId, readerId: toolroom, capturePoint: `${toolroom}-door`, locationExternalKey: 'WS-TOOL' }, project);

  // Alert rules, before the scans that they judge (docs/api.md "Alerts"): the zones are projected first.
  await options.project(await ctx.store.headPosition());
  const rule = (name: string, kind: CreateRuleBody['kind'], zone: string, threshold: number | null = null) =>
    createAlertRule(ctx, orgId, createRuleSchema.parse({ name, kind, location_external_key: zone, ...(threshold === null ? {} : { threshold_seconds: threshold }) }));
  await rule('Arrived at dispatch', 'entered', 'WH-DSP');
  await rule('Left the warehouse', 'left', 'WH');
  await rule('Not seen in the workshop for a day', 'not_seen', 'WS', 86_400);

  // Three days of scans, ending a few minutes ago.
  const now = options.now ?? new Date();
  const end = now.getTime() - 5 * 60_000;
  const firstDay = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - 3 * 86_400_000;
  const at = (day: number, hour: number, minute = 0, second = 0) => Math.min(end, firstDay + day * 86_400_000 + ((hour * 60 + minute) * 60 + second) * 1000 + Math.floor(rnd() * 900));
  const iso = (ms: number) => new Date(ms).toISOString();
  const rssi = () => -45 - Math.floor(rnd() * 30);
  const where = new Map(assets.map((a) => [a.key, a.home]));
  const submissions: Submission[] = [];
  const late: Submission[] = [];
  const reports: ReaderReport[] = [];
  const sweep = (day: number, hour: number, list: Submission[]) => {
    for (const [i, shelf] of shelves.entries()) {
      const here = assets.filter((a) => where.get(a.key) === shelf);
      if (here.length === 0) continue;
      const t = at(day, hour, i * 2);
      const reads: HandheldRead[] = here.map((a, k) =>
        a.barcode && rnd() < 0.3 ? { tag_type: 'barcode', value: a.barcode, observed_at: iso(t + k * 1500) } : { tag_type: 'rfid', value: a.epc, observed_at: iso(t + k * 1500), rssi: rssi() },
      );
      // Every now and then, a tag nobody registered.
      if (rnd() < 0.15) reads.push({ tag_type: 'rfid', value: `E200001D${Math.floor(rnd() * 1e8).toString(16).toUpperCase().padStart(8, '0')}FFFF0000`, observed_at: iso(t + 900) });
      // The shelf named by its label tag half of the time, as a handheld scanning the label does.
      list.push({ location: rnd() < 0.5 ? { external_key: shelf.key } : { tag: { tag_type: 'barcode', value: `LBL-${shelf.key}` } }, reads });
    }
  };
  for (let day = 0; day < 3; day++) {
    // Morning inventory: every shelf's assets, read where they are (parked tags, day after day).
    sweep(day, 7, submissions);
    // Moves: a few assets taken to another shelf during the day, read there.
    const moves = Array.from({ length: 5 }, (_, m) => ({ asset: assets[Math.floor(rnd() * assets.length)]!, to: shelves[Math.floor(rnd() * shelves.length)]!, hour: 10 + m }));
    for (const move of moves) {
      submissions.push({ location: { external_key: move.to.key }, reads: [{ tag_type: 'rfid', value: move.asset.epc, observed_at: iso(at(day, move.hour, 15)), rssi: rssi() }] });
    }
    // Pallet jacks in through the dock at 9, out at 15; a stray tag at the door.
    const jacks = assets.filter((a) => a.key.startsWith('PJ-'));
    reports.push({
      readerId: dock,
      reads: jacks.length + 1,
      message: {
        reader_id: dock,
        reads: [
          ...jacks.map((a, k) => ({ capture_point: `${dock}-in`, tag_type: 'rfid', value: a.epc, observed_at: iso(at(day, 9, k)), rssi: rssi() })),
          { capture_point: `${dock}-in`, tag_type: 'rfid', value: `E2009A30${String(day).padStart(4, '0')}00000000BEEF`, observed_at: iso(at(day, 9, 30)), rssi: -78 },
        ],
      },
    });
    reports.push({
      readerId: dock,
      reads: jacks.length,
      // The CS463 reader's own JSON: microseconds, a string rssi.
      message: {
        sequenceNumber: day,
        rfidReaderName: dock,
        numberOfTags: jacks.length,
        tags: jacks.map((a, k) => ({ epc: a.epc.toLowerCase(), timeStampOfRead: at(day, 15, k) * 1000, antennaPort: 2, capturePointName: `${dock}-out`, rssi: String(rssi()) })),
      },
    });
    // Tools parked in the tool room: its door reader sees them every 15 minutes, reported hourly.
    for (let hour = 6; hour < 18; hour++) {
      for (const move of moves) if (move.hour === hour - 1) where.set(move.asset.key, move.to);
      const parked = assets.filter((a) => where.get(a.key)?.room === 'WS-TOOL');
      const reads = parked.flatMap((a) => [0, 15, 30, 45].map((minute) => ({ capture_point: `${toolroom}-door`, tag_type: 'rfid', value: a.epc, observed_at: iso(at(day, hour, minute)), rssi: rssi() })));
      if (reads.length > 0) reports.push({ readerId: toolroom, reads: reads.length, message: { reader_id: toolroom, reads } });
    }
    // Evening round on day 1 by a handheld that only syncs at the end: its reads arrive late.
    if (day === 1) sweep(day, 19, late);
  }

  // Handheld submissions through an ingest listener of our own.
  const ingest = ingestRole({ ...ctx, config: { ...ctx.config, HOST: '127.0.0.1', INGEST_PORT: 0, KAFKA_BROKERS: undefined } });
  await ingest.start();
  let handheldReads = 0;
  try {
    const url = `${ingest.urls().ingest!}/scans`;
    for (const submission of [...submissions, ...late]) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${scansKey.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ submission_id: randomUUID(), device_id: submissions.includes(submission) ? 'demo-handheld-1' : 'demo-handheld-2', ...submission }),
      });
      const text = await response.text();
      if (response.status !== 202) throw new Error(`the handheld endpoint answered ${response.status}: ${text}`);
      handheldReads += submission.reads.length;
    }
  } finally {
    await ingest.stop();
  }

  let kafkaReads = 0;
  if (ctx.config.KAFKA_BROKERS) {
    kafkaReads = reports.reduce((sum, r) => sum + r.reads, 0);
    await publishReaderReports(ctx, reports, handheldReads + kafkaReads, orgId, options.kafkaTimeoutMs ?? 60_000);
  }

  // An open count of the workshop (docs/api.md "Counts"), started once its scans are projected: its
  // expected assets are those the report places there now, missing until someone scans them.
  await options.project(await ctx.store.headPosition());
  await startCount(ctx, orgId, startCountSchema.parse({ name: 'Workshop count', location_external_key: 'WS' }));

  const times = [...submissions, ...late].flatMap((s) => s.reads.map((r) => Date.parse(r.observed_at)));
  return {
    org_id: orgId,
    org_name: org.name,
    api_key: keyOf(apiKey),
    scans_key: keyOf(scansKey),
    locations,
    assets: assets.length,
    readers: [dock, toolroom],
    scans: { handheld: handheldReads, kafka: kafkaReads, from: iso(Math.min(...times)), to: iso(Math.max(...times)) },
  };
}

function keyOf(key: MintedApiKey): DemoSeed['api_key'] {
  return { id: key.id, token: key.token, scopes: key.scopes };
}

/** How long a consumer of another process may take to ingest the reports before this one consumes them. */
const CONSUMER_GRACE_MS = 10_000;

/**
 * Publishes the reader reports and waits until all of the org's reads are in the read model;
 * consumes them here when no ingest process is a member of the consumer group.
 */
async function publishReaderReports(ctx: ServiceContext, reports: ReaderReport[], expectedReads: number, orgId: number, timeoutMs: number): Promise<void> {
  const { config } = ctx;
  const kafka: KafkaIngestClient = createKafkaIngestClient({
    brokers: kafkaBrokers(config),
    groupId: config.KAFKA_GROUP_ID,
    clientId: 'tracking-demo-seed',
    log: ctx.log,
  });
  try {
    await kafka.produce(
      config.KAFKA_SCAN_TOPIC,
      reports.map((r) => ({ key: Buffer.from(r.readerId), value: Buffer.from(JSON.stringify(r.message)), headers: {} })),
    );
    const count = async () => (await ctx.pool.query<{ n: number }>('SELECT ((SELECT coalesce(sum(reads), 0) FROM scan_read_chunks WHERE org_id = $1) + (SELECT coalesce(sum(count), 0) FROM unknown_reads WHERE org_id = $1))::int AS n', [orgId])).rows[0]!.n;
    const arrived = async (ms: number) => {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        if ((await count()) >= expectedReads) return true;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      return (await count()) >= expectedReads;
    };
    // Brokers that cannot describe groups (librdkafka's mock cluster) leave it unknown: give a
    // running consumer a moment, and consume here only if nothing arrives.
    const members = await kafka.groupMembers().catch(() => null);
    if (members === 0 || (members === null && !(await arrived(CONSUMER_GRACE_MS)))) {
      await new ScanConsumer(ctx, kafka, { scans: config.KAFKA_SCAN_TOPIC, deadLetters: config.KAFKA_DLQ_TOPIC }, ingestMetrics).start();
    }
    if (!(await arrived(timeoutMs))) {
      throw new Error(
        `only ${await count()} of ${expectedReads} reads were ingested within ${timeoutMs / 1000} s: is the ingest consumer of ${config.KAFKA_SCAN_TOPIC} (group ${config.KAFKA_GROUP_ID}) running?`,
      );
    }
  } finally {
    await kafka.close();
  }
}
