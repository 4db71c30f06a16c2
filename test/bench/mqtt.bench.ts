/**
 * Fixed readers through MQTT (issue 22): the world, the reports and the measurements of the Kafka
 * bench (test/bench/reader-load.ts), published by an MQTT.js gateway at QoS 1 to a real Eclipse
 * Mosquitto of the bench's own (test/support/mosquitto.ts: persistence on, as the tests run it),
 * one topic per reader under `scans/bench/`, and consumed by the service's MQTT subscriber
 * (services/ingest/mqtt/subscriber.ts: MQTT 5, a persistent session, a shared subscription at
 * QoS 1, PUBACK once recorded) in a `ROLES=ingest` process of its own beside a projector.
 *
 * The sustained run needs a backlog, as Kafka's pre-filled topic: both subscribers (the service's
 * and the baseline's, each in a share group of its own, so each gets every message) subscribe
 * once with a persistent session and go away; the reports are published; Mosquitto queues them
 * for both sessions; then each comes back and drains its queue. The baseline is a bare MQTT.js
 * subscriber that parses and keys the same reads and writes each batch (what arrived within 5 ms,
 * at most 500 messages: the service's batching) with one multi-row INSERT (BaselineWriter), and
 * acknowledges (PUBACK) after it, as the service does.
 */
import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import { startPrivateMosquitto } from '../support/mosquitto.js';
import { postmasterOf } from './proc.js';
import {
  BaselineWriter,
  LOAD,
  Reports,
  bytesRow,
  childNamed,
  closingRow,
  cpuPerRead,
  cpuSnapshot,
  drainBacklog,
  measureLatency,
  ready,
  seed,
  sleep,
  startRole,
  storeBytes,
  sustainedRow,
  visibleReads,
  type Message,
  type ServiceProcess,
} from './reader-load.js';
import { printStatements, resetStatements } from './statements.js';
import type { BenchContext, BenchRow } from './types.js';

const NAME = 'mqtt';
const PREFIX = 'scans/bench';
const SESSION_SECONDS = 3600;

async function gateway(url: string): Promise<MqttClient> {
  return mqtt.connectAsync(url, { protocolVersion: 5, clientId: 'bench-gateway', clean: true, reconnectPeriod: 200 });
}

/** QoS 1 publishes, up to 500 awaiting their PUBACK at once. */
async function publishAll(gw: MqttClient, messages: Message[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 500) {
    await Promise.all(messages.slice(i, i + 500).map((m) => gw.publishAsync(`${PREFIX}/${m.reader}`, m.value, { qos: 1 })));
  }
}

/** Handed to MQTT.js's handleMessage callback: no PUBACK from the library; the baseline sends it after the INSERT. */
const ACK_LATER = new Error('acknowledged once written');
type PubackSender = { _sendPacket(packet: { cmd: 'puback'; messageId: number; reasonCode: number }): void };

/**
 * The baseline subscriber: MQTT.js, a persistent session, `$share/bare/<filter>` at QoS 1. It
 * batches as the service does (5 ms window, 500 messages at most, one batch written at a time)
 * and acknowledges a batch once its INSERT has committed.
 */
class BareSubscriber {
  private client: MqttClient | null = null;
  private pending: IPublishPacket[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  private failure: unknown = null;

  constructor(
    private readonly url: string,
    private readonly writer: BaselineWriter | null,
  ) {}

  async connect(): Promise<void> {
    const client = mqtt.connect(this.url, {
      protocolVersion: 5,
      clientId: 'bench-bare-subscriber',
      clean: false,
      reconnectPeriod: 0,
      resubscribe: false,
      properties: { sessionExpiryInterval: SESSION_SECONDS, receiveMaximum: 1_000 },
    });
    client.handleMessage = (packet: IPublishPacket, callback: (error?: Error) => void) => {
      this.pending.push(packet);
      this.schedule();
      callback(ACK_LATER);
    };
    this.client = client;
    await new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    });
  }

  async subscribe(): Promise<void> {
    await this.client!.subscribeAsync(`$share/bare/${PREFIX}/#`, { qos: 1 });
  }

  /** Disconnects; `unsubscribe` first ends the session's subscription, so the broker queues nothing more for it. */
  async end(unsubscribe = false): Promise<void> {
    if (unsubscribe) await this.client?.unsubscribeAsync(`$share/bare/${PREFIX}/#`);
    await this.client?.endAsync();
  }

  async until(reads: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((this.writer?.reads ?? 0) < reads) {
      if (this.failure) throw this.failure;
      if (Date.now() > deadline) throw new Error(`the bare subscriber wrote ${this.writer?.reads} of ${reads} reads in ${timeoutMs} ms`);
      await sleep(5);
    }
  }

  private schedule(): void {
    if (this.writing) return;
    if (this.timer && this.pending.length < 500) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.writing = this.drain()
          .catch((error: unknown) => {
            this.failure = error;
          })
          .finally(() => {
            this.writing = null;
            if (this.pending.length > 0) this.schedule();
          });
      },
      this.pending.length >= 500 ? 0 : 5,
    );
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, 500);
      await this.writer?.write(batch.map((p) => p.payload as Buffer));
      const sender = this.client as unknown as PubackSender;
      for (const packet of batch) if (packet.messageId !== undefined) sender._sendPacket({ cmd: 'puback', messageId: packet.messageId, reasonCode: 0 });
    }
  }
}

export async function run(bench: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const broker = await startPrivateMosquitto();
  const gw = await gateway(broker.url);
  const postmaster = postmasterOf((await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  const env = {
    DATABASE_URL: bench.url,
    MQTT_URL: broker.url,
    MQTT_TOPICS: `${PREFIX}/#`,
    MQTT_SHARE_GROUP: 'tracking-ingest-bench',
    MQTT_CLIENT_ID: 'tracking-ingest-bench',
    MQTT_SESSION_EXPIRY_SECONDS: String(SESSION_SECONDS),
  };
  const projector = await startRole('projector', { DATABASE_URL: bench.url });
  let ingest: ServiceProcess | null = null;
  try {
    const world = await seed(bench.url, bench.log);
    const reports = new Reports(world);
    const cpu = cpuSnapshot({ ingest: () => ingest?.pid ?? null, projector: projector.pid, postmaster, broker: childNamed('mosquitto') });

    // Both sessions subscribe once and go away: Mosquitto queues the backlog for each.
    const first = await startRole('ingest', env);
    await ready(first);
    await first.stop();
    const writer = await BaselineWriter.create(bench.pool, world.orgId);
    const subscribing = new BareSubscriber(broker.url, null);
    await subscribing.connect();
    await subscribing.subscribe();
    await subscribing.end();

    bench.log(`publishing ${LOAD.sustainedReads} reads in messages of ${LOAD.readsPerMessage} at QoS 1 …`);
    const backlog: Message[] = [];
    let published = 0;
    while (published < LOAD.sustainedReads) {
      const m = reports.message();
      backlog.push(m);
      published += m.reads;
    }
    await publishAll(gw, backlog);
    const lastProbes = [...reports.lastOf.values()].map((m) => m.lastProbe);

    bench.log('baseline: bare MQTT.js subscriber (shared subscription, QoS 1), one multi-row INSERT per batch …');
    const bare = new BareSubscriber(broker.url, writer);
    const baselineStart = cpu();
    await bare.connect();
    await bare.until(published, 300_000);
    const baselineEnd = cpu();
    await bare.end(true);
    const written = await writer.rowCount();
    if (written !== published) throw new Error(`the baseline wrote ${written} reads, ${published} published`);
    const base = writer.result();
    const baselineCpu = cpuPerRead(baselineStart, baselineEnd, published, { bench: 'subscriber' });
    bench.log(`  ${Math.round(base.reads / base.seconds)} reads/s (${base.seconds.toFixed(1)} s); CPU/read: ${baselineCpu}`);

    await resetStatements(bench.pool);
    const bytesBefore = await storeBytes(bench.pool);
    const before = await visibleReads(bench.pool, world.orgId);
    bench.log('ingest process: receive, append, project …');
    ingest = await startRole('ingest', env);
    const drained = await drainBacklog(bench.pool, world, before, published, lastProbes, cpu);
    await printStatements(bench.pool, 'sustained');
    const pipelineCpu = cpuPerRead(drained.cpuStart, drained.cpuEnd, drained.reads, { bench: 'probe' });
    bench.log(`  ${Math.round(drained.reads / drained.seconds)} reads/s; CPU/read: ${pipelineCpu}`);
    rows.push(
      sustainedRow(NAME, 'MQTT', { ...drained, cpu: pipelineCpu }, { label: 'bare MQTT.js subscriber + multi-row INSERT', ...base, cpu: baselineCpu }),
      bytesRow(NAME, (await storeBytes(bench.pool)) - bytesBefore, published),
    );

    // Latency at a fixed offered load (the subscriber caught up).
    const send = async (batch: Message[]) => {
      await Promise.all(batch.map((m) => gw.publishAsync(`${PREFIX}/${m.reader}`, m.value, { qos: 1 })));
    };
    const latency = await measureLatency(bench, NAME, 'MQTT', world, reports, send, cpu);
    rows.push(...latency.rows);
    // Exactly once: every published read shows once.
    rows.push(await closingRow(bench, NAME, world.orgId, before, published + latency.reads, ingest.pid));
    return rows;
  } finally {
    await ingest?.stop();
    await projector.stop();
    await gw.endAsync().catch(() => undefined);
    await broker.remove();
  }
}
