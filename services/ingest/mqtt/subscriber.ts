import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import client from 'prom-client';
import type { ServiceContext } from '../../../shared/service-context.js';
import { isConnectionError } from '../../../shared/db/pool.js';
import { CommandContentionError } from '../../../shared/domain/command.js';
import { keepReaderDeadLetters, recordReaderScans, type ReaderDeadLetter } from '../../../shared/domain/scans/commands.js';
import type { ReaderMessage } from '../../../shared/domain/scans/decider.js';
import { parseReaderMessage } from '../../../shared/domain/scans/reader-messages.js';
import { EventStoreUnavailableError } from '../../../shared/event-store/port.js';
import { sleep, untilDone } from '../../../shared/retry.js';
import { metricsRegistry } from '../../ops/metrics.js';
import type { IngestMetrics } from '../metrics.js';
import type { MqttTls } from './tls-files.js';

const connectedGauge = new client.Gauge({
  name: 'tracking_mqtt_connected',
  help: 'Whether the fixed-reader MQTT subscriber is connected and subscribed (1) or disconnected, reconnecting (0)',
  registers: [metricsRegistry],
});
const disconnections = new client.Counter({
  name: 'tracking_mqtt_disconnections_total',
  help: 'Times the fixed-reader MQTT subscriber lost its connection to the broker (it reconnects with backoff)',
  registers: [metricsRegistry],
});
const deadLetters = new client.Counter({
  name: 'tracking_mqtt_dead_letters_total',
  help: 'MQTT messages that are not JSON or match neither shape, kept as dead letters (scans dead-letters)',
  registers: [metricsRegistry],
});

export interface MqttSubscriberOptions {
  /** mqtt:// or mqtts://, credentials in it or in username/password. */
  url: string;
  username?: string;
  password?: string;
  /** With mqtts://: a private CA, and a client certificate and key (readMqttTls). */
  tls?: MqttTls;
  /** Stable across restarts: the persistent session's name. */
  clientId: string;
  topics: readonly string[];
  shareGroup: string;
  sessionExpirySeconds: number;
  /** How long the first message of a batch waits for others (default 5 ms). */
  batchWindowMs?: number;
  /** Messages recorded in one append at most (default 500). */
  maxBatch?: number;
  /** Pause before the n-th reconnection in a row (default 1 s, 2 s, 4 s, ... up to 30 s). */
  backoffMs?: (attempt: number) => number;
}

export type SubscriberState = { connected: true } | { connected: false; reason: string; sinceMs: number };

/** Pause before the n-th reconnection in a row: 1 s, 2 s, 4 s, ... up to 30 s. */
export function reconnectBackoffMs(attempt: number): number {
  return Math.min(1_000 * 2 ** Math.max(0, attempt - 1), 30_000);
}

/** Failures that pass (Postgres or the log unreachable, a lost race): the batch is tried again. */
function transient(error: unknown): boolean {
  return error instanceof EventStoreUnavailableError || error instanceof CommandContentionError || isConnectionError(error);
}

/** Node's codes for a server certificate that fails verification (untrusted, expired, another name). */
const CERTIFICATE_REFUSED = /^(UNABLE_TO_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_|ERR_TLS_CERT_ALTNAME_INVALID)/;

function describe(error: unknown): string {
  // TLS failures say which side refused, in a line an operator can act on (not OpenSSL's raw text).
  const { code, reason } = error as { code?: unknown; reason?: unknown };
  if (error instanceof Error && typeof code === 'string' && CERTIFICATE_REFUSED.test(code)) return `TLS: broker certificate refused: ${error.message} (${code})`;
  if (typeof code === 'string' && code.startsWith('ERR_SSL_') && typeof reason === 'string') return `TLS: handshake failed: ${reason} (${code})`;
  if (error instanceof Error) return `${error.name !== 'Error' ? `${error.name}: ` : ''}${error.message}`.replace(/\s+/g, ' ').trim();
  return String(error).replace(/\s+/g, ' ').trim();
}

/** MQTT 5 reason code of a DISCONNECT that says another connection took this client id's session. */
const SESSION_TAKEN_OVER = 142;

interface Received {
  topic: string;
  payload: Buffer;
  qos: number;
  messageId: number | undefined;
  /** The connection it arrived on: a PUBACK is only meaningful on that one. */
  connection: number;
  receivedAt: Date;
}

/**
 * Handed to MQTT.js's handleMessage callback for a QoS 1 message: the library then sends no
 * PUBACK (handlers/publish.js answers an error by going on to the next packet without one), and
 * this subscriber sends it itself once the message is durably recorded.
 */
class AckDeferred extends Error {
  constructor() {
    super('acknowledged once recorded');
  }
}
const ACK_DEFERRED = new AckDeferred();

type PubackSender = { _sendPacket(packet: { cmd: 'puback'; messageId: number; reasonCode: number }, cb?: (error?: Error) => void): void };

/**
 * The fixed-reader MQTT subscriber (docs/scan-ingestion.md, "Fixed readers over MQTT"): MQTT 5, a persistent
 * session (clean start false, a session expiry, a stable client id), the topic filters subscribed
 * as shared subscriptions at QoS 1. Messages received within a few milliseconds are recorded
 * together: reads in one atomic append (recordReaderScans), refused messages as dead letters
 * (keepReaderDeadLetters); only then is each acknowledged (PUBACK), in the order received. A
 * message not acknowledged when the connection or the process goes is delivered again by the
 * broker, and the read models count a read once by its key. While Postgres is unreachable the
 * batch is tried again with a growing pause and nothing is acknowledged.
 */
export class MqttScanSubscriber {
  private state: SubscriberState = { connected: false, reason: 'not started', sinceMs: Date.now() };
  private client: MqttClient | null = null;
  private connection = 0;
  private attempt = 0;
  private lastError: string | null = null;
  private closing = false;
  private pending: Received[] = [];
  private timer: NodeJS.Timeout | null = null;
  private draining: Promise<void> | null = null;
  private readonly batchWindowMs: number;
  private readonly maxBatch: number;
  private readonly backoffMs: (attempt: number) => number;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly options: MqttSubscriberOptions,
    private readonly metrics: IngestMetrics,
  ) {
    this.batchWindowMs = options.batchWindowMs ?? 5;
    this.maxBatch = options.maxBatch ?? 500;
    this.backoffMs = options.backoffMs ?? reconnectBackoffMs;
    connectedGauge.set(0);
  }

  /**
   * Connects and keeps connecting: a lost connection is logged with its cause and tried again
   * with a growing pause. Resolves once the first attempt has connected or failed: the process
   * starts either way.
   */
  async start(): Promise<void> {
    const url = new URL(this.options.url);
    const username = decodeURIComponent(url.username) || this.options.username;
    const password = decodeURIComponent(url.password) || this.options.password;
    url.username = '';
    url.password = '';
    const mqttClient = mqtt.connect(url.toString(), {
      protocolVersion: 5,
      clientId: this.options.clientId,
      clean: false,
      ...(username ? { username } : {}),
      ...(password ? { password } : {}),
      ...this.options.tls,
      keepalive: 30,
      connectTimeout: 10_000,
      reconnectPeriod: this.backoffMs(1),
      // A refused connection (bad credentials, a client id not allowed) is tried again too.
      reconnectOnConnackError: true,
      resubscribe: false,
      properties: { sessionExpiryInterval: this.options.sessionExpirySeconds, receiveMaximum: 1_000 },
    });
    this.client = mqttClient;
    mqttClient.handleMessage = (packet: IPublishPacket, callback: (error?: Error) => void) => {
      this.receive(packet);
      if (packet.qos > 0) callback(ACK_DEFERRED);
      else callback();
    };
    const firstTried = new Promise<void>((resolve) => {
      mqttClient.once('connect', () => resolve());
      mqttClient.once('close', () => resolve());
    });
    mqttClient.on('connect', (connack) => {
      this.connection++;
      this.attempt = 0;
      this.lastError = null;
      mqttClient.options.reconnectPeriod = this.backoffMs(1);
      this.ctx.log.info({ clientId: this.options.clientId, sessionPresent: connack.sessionPresent }, 'mqtt: connected');
      void this.subscribe(mqttClient, this.connection);
    });
    mqttClient.on('error', (error) => {
      this.lastError = describe(error);
      if (!this.state.connected && !this.closing) this.disconnectedBecause(this.lastError);
    });
    mqttClient.on('disconnect', (packet) => {
      const code = packet.reasonCode ?? 0;
      this.lastError = `broker disconnected us (reason code ${code}${packet.properties?.reasonString ? `: ${packet.properties.reasonString}` : ''})`;
      if (code === SESSION_TAKEN_OVER) {
        this.ctx.log.error({ clientId: this.options.clientId }, `mqtt: another connection took over client id ${this.options.clientId}: give each ingest process its own MQTT_CLIENT_ID`);
      }
    });
    mqttClient.on('offline', () => {
      // Emitted just before MQTT.js sets its reconnect timer, which reads reconnectPeriod now.
      const pause = this.backoffMs(++this.attempt);
      mqttClient.options.reconnectPeriod = pause;
      if (this.closing) return;
      const reason = this.lastError ?? 'connection closed';
      if (this.state.connected) disconnections.inc();
      this.disconnectedBecause(reason);
      this.ctx.log.error({ clientId: this.options.clientId, reconnectInMs: pause }, `mqtt: disconnected: ${reason}; reconnecting in ${pause} ms`);
    });
    await firstTried;
  }

  /** Connected and subscribed, or why not and since when: /readyz and /healthz read it. */
  status(): SubscriberState {
    return this.state;
  }

  /**
   * Records and acknowledges what it has received, for at most `drainMs`, then disconnects. It
   * stays subscribed: the session (and its share of the group's messages, which Mosquitto queues
   * for a member that is away) waits for a process with this client id, so a restart loses
   * nothing even when no other process runs. What is still unacknowledged is delivered again then.
   */
  async stop(drainMs = 10_000): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const drained = (async () => {
      await this.draining;
      if (this.pending.length > 0 && !this.closing) await this.drain();
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([drained, new Promise((resolve) => (timer = setTimeout(resolve, drainMs)))]);
    clearTimeout(timer);
    this.closing = true;
    await drained;
    await this.client?.endAsync().catch(() => undefined);
    this.disconnectedBecause('stopped');
  }

  private disconnectedBecause(reason: string): void {
    this.state = { connected: false, reason, sinceMs: this.state.connected ? Date.now() : this.state.sinceMs };
    connectedGauge.set(0);
  }

  private async subscribe(mqttClient: MqttClient, connection: number): Promise<void> {
    const filters = this.options.topics.map((topic) => `$share/${this.options.shareGroup}/${topic}`);
    for (let attempt = 1; !this.closing && connection === this.connection; attempt++) {
      try {
        const granted = await mqttClient.subscribeAsync(filters, { qos: 1 });
        const refused = granted.filter((g) => g.qos > 1);
        if (refused.length === 0) {
          this.state = { connected: true };
          connectedGauge.set(1);
          return;
        }
        this.lastError = `subscription refused: ${refused.map((g) => `${g.topic} (reason code ${g.qos})`).join(', ')}`;
      } catch (error) {
        this.lastError = `subscribe failed: ${describe(error)}`;
      }
      if (connection !== this.connection) return;
      const pause = this.backoffMs(attempt);
      this.disconnectedBecause(this.lastError);
      this.ctx.log.error({ filters }, `mqtt: ${this.lastError}; trying again in ${pause} ms`);
      await sleep(pause);
    }
  }

  private receive(packet: IPublishPacket): void {
    const payload = typeof packet.payload === 'string' ? Buffer.from(packet.payload) : Buffer.from(packet.payload);
    this.pending.push({ topic: packet.topic, payload, qos: packet.qos, messageId: packet.messageId, connection: this.connection, receivedAt: new Date() });
    this.schedule();
  }

  /** A batch starts batchWindowMs after its first message, or at once when maxBatch are waiting. */
  private schedule(): void {
    if (this.closing || this.draining) return;
    if (this.timer && this.pending.length < this.maxBatch) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.draining = this.drain().finally(() => {
          this.draining = null;
          if (this.pending.length > 0) this.schedule();
        });
      },
      this.pending.length >= this.maxBatch ? 0 : this.batchWindowMs,
    );
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0 && !this.closing) {
      const batch = this.pending.splice(0, this.maxBatch);
      try {
        if (await this.record(batch)) this.acknowledge(batch);
      } catch (error) {
        // Not a passing failure: leave the batch unacknowledged and reconnect, so that the
        // broker delivers it again (as a Kafka consumer that stops is started again).
        this.ctx.log.error({ err: error, messages: batch.length }, `mqtt: scan batch not recorded: ${describe(error)}; reconnecting`);
        this.lastError = `scan batch not recorded: ${describe(error)}`;
        this.client?.stream?.destroy();
        return;
      }
    }
  }

  /** Appends the batch's reads and dead letters; false when it stopped being ours first (closing, or all of it on a connection gone). */
  private async record(batch: Received[]): Promise<boolean> {
    const good: ReaderMessage[] = [];
    const dead: ReaderDeadLetter[] = [];
    for (const message of batch) {
      const parsed = parseReaderMessage(message.payload);
      if (parsed.ok) good.push({ readerId: parsed.readerId, reads: parsed.reads });
      else dead.push({ topic: message.topic, payload: message.payload, reason: parsed.reason, receivedAt: message.receivedAt });
    }
    if (good.length > 0) {
      const recorded = await this.untilDone(batch, async () => {
        const { counts, unknownByCause } = await recordReaderScans(this.ctx, good);
        this.metrics.recorded('mqtt', counts.accepted, unknownByCause);
      });
      if (!recorded) return false;
    }
    if (dead.length > 0) {
      const kept = await this.untilDone(batch, async () => {
        await keepReaderDeadLetters(this.ctx, dead);
        deadLetters.inc(dead.length);
      });
      if (!kept) return false;
    }
    return true;
  }

  private untilDone(batch: Received[], work: () => Promise<void>): Promise<boolean> {
    return untilDone(work, {
      retryable: transient,
      onRetry: (error, attempt) => this.ctx.log.warn({ err: error, attempt, messages: batch.length }, 'mqtt: scan batch not recorded yet; trying again'),
      // A batch wholly of a connection gone will be delivered again: no need to hold on to it.
      wanted: () => !this.closing && batch.some((m) => m.connection === this.connection),
    });
  }


  /** PUBACKs, in the order received, for the QoS 1 messages of a batch that arrived on the current connection. */
  private acknowledge(batch: Received[]): void {
    const mqttClient = this.client;
    if (!mqttClient?.connected) return;
    const sender = mqttClient as unknown as PubackSender;
    for (const message of batch) {
      if (message.qos === 0 || message.messageId === undefined || message.connection !== this.connection) continue;
      sender._sendPacket({ cmd: 'puback', messageId: message.messageId, reasonCode: 0 });
    }
  }
}
