import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { eventually } from '../support/kafka.js';
import { placedReadsAppend } from '../support/scans.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type Received, type WebhookReceiver } from '../support/webhook-receiver.js';
import { client } from '../master-data/http.js';

/**
 * kill -9 of the process running the webhooks role while alerts are raised and resolved, then
 * another started while more are (docs/design.md "Alerts and webhooks"): every change arrives,
 * none under two webhook-ids (the cursor and the deliveries it queued commit together), and each
 * alert's resolution after its raising. The api, ingest and projector run in this process; the
 * webhooks role in a child process, as a deployment runs it.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const S = 1_000_000;

let svc: TestService;
let receiver: WebhookReceiver;
let child: ChildProcess | null = null;

beforeAll(async () => {
  svc = await startTestService('webhook_alerts_crash', { ROLES: 'api,ingest,projector', LOG_LEVEL: process.env.TEST_LOG ?? 'silent' });
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
    // A lease of 2 × 2 s + 5 s: what a killed sender held is sent again after some 9 s.
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
const keyOf = (r: Received) => `${String(r.json.data.id)} ${r.json.type}`;

describe('the webhooks process killed while alerts flow', () => {
  it('kill -9 mid-stream, more changes while it is down, a restart: every alert.raised and alert.resolved once, each resolution after its raising', { timeout: 240_000 }, async () => {
    const ctx = svc.service.ctx;
    const orgId = (await createOrg(ctx, 'alerts crash')).id;
    const key = await mintApiKey(ctx, { orgId, scopes: ['assets:write', 'locations:write', 'alerts:write', 'webhooks:write'] });
    const api = client(svc.apiUrl, key.token);
    const created = async (route: string, body: Record<string, unknown>) => {
      const reply = await api<{ data: { id: number } }>('POST', route, { body });
      expect(reply.status, reply.text).toBe(201);
      return reply.body.data.id;
    };
    const cage = await created('/locations', { name: 'Cage', external_key: 'CAGE' });
    const dock = await created('/locations', { name: 'Dock', external_key: 'DOCK' });
    const assets: Array<{ id: number; tag: string }> = [];
    for (let i = 0; i < 6; i++) {
      const tag = `E28011606000020900BB${String(i).padStart(4, '0')}`;
      assets.push({ id: await created('/assets', { name: `trolley ${i}`, external_key: `TROLLEY-${i}`, tags: [{ tag_type: 'rfid', value: tag }] }), tag });
    }
    await created('/alert-rules', { name: 'dwell', kind: 'dwell_exceeded', location_id: cage, threshold_seconds: 60 });
    // Every answer takes 300 ms: a kill finds some in flight.
    receiver.answer('/alerts', () => ({ status: 200, delayMs: 300 }));
    await created('/webhook-endpoints', { url: receiver.url('/alerts'), event_types: ['alert.raised', 'alert.resolved'] });

    // Each round, every asset stays 2 minutes in the cage and leaves: a dwell raised and resolved (observed an hour ago on).
    let us = Date.now() * 1000 - 3600 * S;
    const round = async () => {
      const enter = assets.map((a) => ({ tag: a.tag, assetId: a.id, us: us }));
      const leave = assets.map((a) => ({ tag: a.tag, assetId: a.id, us: us + 120 * S }));
      us += 180 * S;
      await ctx.store.appendToStreams([placedReadsAppend(orgId, cage, enter)]);
      await ctx.store.appendToStreams([placedReadsAppend(orgId, dock, leave)]);
    };

    const first = spawnWebhooks();
    child = first.process;
    await first.ready;
    // Rounds keep coming while the first process queues and sends; it is killed mid-stream.
    let rounds = 0;
    while (receiver.to('/alerts').length < 12) {
      await round();
      rounds++;
      await new Promise((r) => setTimeout(r, 100));
      expect(rounds).toBeLessThan(200);
    }
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    const atKill = new Set(receiver.to('/alerts').map(keyOf)).size;
    // More changes while no webhooks process runs.
    for (let i = 0; i < 3; i++, rounds++) await round();

    const second = spawnWebhooks();
    child = second.process;
    await second.ready;
    for (let i = 0; i < 3; i++, rounds++) await round();

    // Every change: six assets, `rounds` stays each, raised and resolved.
    const expected = new Set<string>();
    await eventually(async () => {
      const { rows } = await ctx.pool.query<{ alert_id: string; status: string }>('SELECT alert_id, status FROM alerts WHERE org_id = $1', [orgId]);
      expect(rows.length).toBe(assets.length * rounds);
      expect(rows.every((r) => r.status === 'resolved')).toBe(true);
      for (const r of rows) for (const type of ['alert.raised', 'alert.resolved']) expected.add(`${r.alert_id} ${type}`);
    }, 60_000, 200);
    await eventually(async () => expect(new Set(receiver.to('/alerts').map(keyOf))).toEqual(expected), 90_000, 200);
    // A moment more: anything queued twice would come now.
    await new Promise((r) => setTimeout(r, 2000));
    const requests = receiver.to('/alerts');
    const idsByChange = new Map<string, Set<string>>();
    for (const r of requests) idsByChange.set(keyOf(r), (idsByChange.get(keyOf(r)) ?? new Set()).add(idOf(r)));
    for (const [change, ids] of idsByChange) expect(ids.size, `${change} under ${ids.size} webhook-ids`).toBe(1);
    expect(new Set(idsByChange.keys())).toEqual(expected);
    // Killed mid-stream: most of the changes came after.
    expect(atKill).toBeLessThan(expected.size / 2);
    // Per alert: its resolution first came after its raising.
    const firstAt = (k: string) => requests.findIndex((r) => keyOf(r) === k);
    for (const change of expected) {
      const [alertId] = change.split(' ');
      expect(firstAt(`${alertId} alert.resolved`)).toBeGreaterThan(firstAt(`${alertId} alert.raised`));
    }
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
    child = null;
  });
});
