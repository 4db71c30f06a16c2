import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { eventually } from '../support/kafka.js';
import { scanner } from '../support/scans.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type Received, type WebhookReceiver } from '../support/webhook-receiver.js';
import { client } from '../master-data/http.js';

/**
 * kill -9 of the webhooks process mid-delivery, then a restart: no event is lost, and the one
 * in flight is sent again under the same webhook-id (at least once). The api, ingest and projector
 * run in this process; the webhooks role in a child process, as a deployment runs it.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let svc: TestService;
let receiver: WebhookReceiver;
let child: ChildProcess | null = null;

beforeAll(async () => {
  svc = await startTestService('webhooks_crash', { ROLES: 'api,ingest,projector' });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  child?.kill('SIGKILL');
  await svc?.stop();
  await receiver?.close();
});

function spawnWebhooks(): { process: ChildProcess; ready: Promise<string> } {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: svc.db.url,
    SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY,
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    LOG_LEVEL: 'warn',
    ROLES: 'webhooks',
    // A lease of 2 × 2 s + 5 s: what a crashed worker held is sent again after some 9 s.
    WEBHOOK_TIMEOUT_MS: '2000',
    WEBHOOK_RETRY_SCALE: '0.001',
  };
  const started = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const ready = new Promise<string>((resolve, reject) => {
    let out = '';
    started.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('tracking service ready')) resolve(out);
    });
    started.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    started.once('exit', (code) => reject(new Error(`the service exited early (${code}): ${out}`)));
  });
  return { process: started, ready };
}

const idOf = (r: Received) => r.headers['webhook-id'] as string;
const at = (s: number) => new Date(Date.UTC(2026, 4, 25, 14, 0, s)).toISOString();

describe('the webhooks process killed mid-delivery', () => {
  it('kill -9, then a restart: every event arrives, in order per asset, and the one in flight again under the same webhook-id', { timeout: 120_000 }, async () => {
    const ctx = svc.service.ctx;
    const orgId = (await createOrg(ctx, 'crash')).id;
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:write', 'locations:write', 'webhooks:write'] });
    const api = client(svc.apiUrl, key.token);
    const locations: number[] = [];
    for (const name of ['A', 'B', 'C']) locations.push((await api<{ data: { id: number } }>('POST', '/locations', { body: { name, external_key: `CRASH-${name}` } })).body.data.id);
    const assets: Array<{ id: number; tag: string }> = [];
    for (const i of [1, 2]) {
      const tag = `CRASH-SN-${i}`;
      assets.push({ id: (await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'pallet', tags: [{ tag_type: 'barcode', value: tag }] } })).body.data.id, tag });
    }
    // Every answer takes 700 ms: the kill finds one in flight.
    receiver.answer('/crash', () => ({ status: 200, delayMs: 700 }));
    expect((await api('POST', '/webhook-endpoints', { body: { url: receiver.url('/crash'), event_types: ['asset.first_seen', 'asset.moved'] } })).status).toBe(201);
    const scans = await scanner(svc, orgId);
    const expected = new Map<number, number[]>();
    for (let step = 0; step < 8; step++) {
      for (const [i, asset] of assets.entries()) {
        const location = locations[(step + i) % 3]!;
        await scans.scan({ id: location }, [{ tag_type: 'barcode', value: asset.tag, observed_at: at(step * 10 + i) }]);
        expected.set(asset.id, [...(expected.get(asset.id) ?? []), location]);
      }
    }

    const first = spawnWebhooks();
    child = first.process;
    await first.ready;
    await eventually(async () => expect(receiver.to('/crash').length).toBeGreaterThanOrEqual(3), 30_000, 20);
    // Mid-delivery: a request has arrived and its answer is still 700 ms away.
    const inFlight = receiver.to('/crash').filter((r) => Date.now() - r.at < 600).map(idOf);
    expect(inFlight.length).toBeGreaterThan(0);
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    const beforeRestart = receiver.to('/crash').length;

    const second = spawnWebhooks();
    child = second.process;
    await second.ready;
    await eventually(async () => expect(new Set(receiver.to('/crash').map(idOf)).size).toBe(16), 60_000, 200);
    const requests = receiver.to('/crash');
    // What was in flight at the kill came again, under the same webhook-id, after the restart.
    for (const id of inFlight) expect(requests.slice(beforeRestart).map(idOf)).toContain(id);
    for (const asset of assets) {
      const mine = requests.filter((r) => r.json.data.asset_id === asset.id);
      const ids = [...new Set(mine.map(idOf))];
      const firsts = ids.map((id) => mine.find((r) => idOf(r) === id)!.json);
      const locationsSeen = firsts.map((json) => (json.type === 'asset.first_seen' ? json.data.location_id : json.data.to_location_id));
      expect(locationsSeen).toEqual(expected.get(asset.id));
      // Order: an event's every copy came before the next event's first.
      const order = mine.map((r) => ids.indexOf(idOf(r)));
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
    child = null;
  });
});
