import mqtt from 'mqtt';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { mintApiKey } from '../support/auth.js';
import { eventually, gateway, kafkaEnv } from '../support/kafka.js';
import { at, canonical, readerWorld, unique } from '../support/reader-corpus.js';
import { startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * A fixed reader's reads, published over MQTT to the run's Eclipse Mosquitto or to the run's
 * Kafka broker, move an asset: the partner's endpoint receives signed asset.first_seen and
 * asset.moved with the reader and capture point as the source. The MQTT case is skipped where
 * mosquitto is not installed (global-setup says so).
 */

const BROKER = inject('mqttUrl');
const skip = BROKER === '';
const id = unique('webhooks');

let svc: TestService;
let receiver: WebhookReceiver;
beforeAll(async () => {
  if (skip) return;
  svc = await startTestService('webhooks_fixed', { MQTT_URL: BROKER, MQTT_TOPICS: `scans/${id}/#`, MQTT_SHARE_GROUP: `group-${id}`, MQTT_CLIENT_ID: `ingest-${id}` });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

describe.skipIf(skip)('webhooks from fixed readers', () => {
  it('reads published over MQTT: asset.first_seen and asset.moved with source {kind: fixed, reader_id, capture_point}', async () => {
    const w = await readerWorld(svc.service, 'webhooks-fixed', 1);
    const key = await mintApiKey(svc.service.ctx, { orgId: w.orgId, scopes: ['webhooks:write'] });
    const created = await fetch(`${svc.apiUrl}/webhook-endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url('/fixed'), event_types: ['asset.first_seen', 'asset.moved'] }),
    });
    expect(created.status).toBe(201);
    const { secret } = ((await created.json()) as { data: { secret: string } }).data;
    const gw = await mqtt.connectAsync(BROKER, { protocolVersion: 5, clientId: unique('gateway') });
    try {
      const [x] = w.assets;
      await gw.publishAsync(`scans/${id}/${w.reader}`, JSON.stringify(canonical(w.reader, [{ point: `${w.reader}-1`, epc: x!.epc, s: 0 }, { point: `${w.reader}-1`, epc: x!.epc, s: 1 }])), { qos: 1 });
      await gw.publishAsync(`scans/${id}/${w.reader}`, JSON.stringify(canonical(w.reader, [{ point: `${w.reader}-2`, epc: x!.epc, s: 5 }])), { qos: 1 });
    } finally {
      await gw.endAsync();
    }
    await eventually(async () => expect(receiver.to('/fixed')).toHaveLength(2), 20_000);
    const [first, moved] = receiver.to('/fixed');
    for (const r of [first!, moved!]) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    expect(first!.json).toMatchObject({ type: 'asset.first_seen', data: { asset_id: w.assets[0]!.id, location_id: w.locations[0]!.id, observed_at: at(0), source: { kind: 'fixed', reader_id: w.reader, capture_point: `${w.reader}-1` } } });
    expect(moved!.json).toMatchObject({
      type: 'asset.moved',
      data: { from_location_id: w.locations[0]!.id, to_location_id: w.locations[1]!.id, to_location_external_key: w.locations[1]!.external_key, observed_at: at(5), source: { kind: 'fixed', reader_id: w.reader, capture_point: `${w.reader}-2` } },
    });
  });
});

describe('webhooks from fixed readers over Kafka', () => {
  let kafkaSvc: TestService;
  let kafkaReceiver: WebhookReceiver;
  let gw: Awaited<ReturnType<typeof gateway>>;
  let topic: string;
  beforeAll(async () => {
    const env = await kafkaEnv('webhooks-fixed');
    topic = env.KAFKA_SCAN_TOPIC;
    kafkaSvc = await startTestService('webhooks_kafka', env);
    kafkaReceiver = await webhookReceiver();
    gw = await gateway();
  });
  afterAll(async () => {
    await gw?.close();
    await kafkaSvc?.stop();
    await kafkaReceiver?.close();
  });

  it('reads a gateway publishes to Kafka: a signed asset.first_seen, then asset.moved, in order, with the reader and capture point as source', async () => {
    const w = await readerWorld(kafkaSvc.service, 'webhooks-kafka', 1);
    const key = await mintApiKey(kafkaSvc.service.ctx, { orgId: w.orgId, scopes: ['webhooks:write'] });
    const created = await fetch(`${kafkaSvc.apiUrl}/webhook-endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: kafkaReceiver.url('/kafka'), event_types: ['asset.first_seen', 'asset.moved'] }),
    });
    expect(created.status).toBe(201);
    const { secret } = ((await created.json()) as { data: { secret: string } }).data;
    const [x] = w.assets;
    await gw.publish(topic, w.reader, canonical(w.reader, [{ point: `${w.reader}-1`, epc: x!.epc, s: 0 }, { point: `${w.reader}-1`, epc: x!.epc, s: 1 }]));
    await gw.publish(topic, w.reader, canonical(w.reader, [{ point: `${w.reader}-2`, epc: x!.epc, s: 5 }]));
    await eventually(async () => expect(kafkaReceiver.to('/kafka')).toHaveLength(2), 30_000);
    const [first, moved] = kafkaReceiver.to('/kafka');
    for (const r of [first!, moved!]) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    expect(first!.json).toMatchObject({ type: 'asset.first_seen', data: { asset_id: x!.id, location_id: w.locations[0]!.id, observed_at: at(0), source: { kind: 'fixed', reader_id: w.reader, capture_point: `${w.reader}-1` } } });
    expect(moved!.json).toMatchObject({
      type: 'asset.moved',
      data: { asset_id: x!.id, from_location_id: w.locations[0]!.id, to_location_id: w.locations[1]!.id, observed_at: at(5), source: { kind: 'fixed', reader_id: w.reader, capture_point: `${w.reader}-2` } },
    });
    expect(first!.headers['webhook-id']).not.toBe(moved!.headers['webhook-id']);
  });
});
