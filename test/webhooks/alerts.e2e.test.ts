import { execFile } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alertsProjection } from '../../projections/alerts/projection.js';
import { pruneAlertOutbox } from '../../services/webhooks/alerts.js';
import { createLogger } from '../../shared/logger.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { eventually } from '../support/kafka.js';
import { scanner } from '../support/scans.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type Received, type WebhookReceiver } from '../support/webhook-receiver.js';
import { client } from '../master-data/http.js';

/**
 * alert.raised and alert.resolved (docs/api.md "Webhooks", docs/design.md "Alerts and webhooks")
 * end to end: a real service (its `alerts` projection split in two segments), real reads, real HTTP
 * to a receiver in this process. A dwell alert raised by a read and resolved when the asset
 * leaves, a not_seen alert raised by a read and resolved when the asset is seen again, each
 * delivered signed (verified with the `standardwebhooks` library), its `data` the API's Alert at
 * that change; an endpoint not subscribed to a type, or created after the change, does not get it;
 * and `projections rebuild alerts`, which empties the outbox and writes again the rows the role has
 * not followed yet, sends nothing twice and loses nothing.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const SEGMENTS = process.env.TEST_SEGMENTS ?? 'alerts=2';

let svc: TestService;
let receiver: WebhookReceiver;

beforeAll(async () => {
  svc = await startTestService('webhook_alerts', { WEBHOOK_RETRY_SCALE: '0.0001', WEBHOOK_TIMEOUT_MS: '1500', PROJECTION_SEGMENTS: SEGMENTS, LOG_LEVEL: process.env.TEST_LOG ?? 'silent' });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

const ALERTS = ['alert.raised', 'alert.resolved'];
const idOf = (r: Received) => r.headers['webhook-id'] as string;
const iso = (msAgo: number) => new Date(Date.now() - msAgo).toISOString();

type Alert = Record<string, unknown> & { id: string; status: string };

/** An org with a zone (CAGE) and a place outside it (DOCK), two assets, a dwell rule for one and a not_seen rule for the other. */
async function world() {
  const ctx = svc.service.ctx;
  const orgId = (await createOrg(ctx, `alerts-${randomUUID()}`)).id;
  const key = await mintApiKey(ctx, { orgId, scopes: ['assets:write', 'locations:write', 'alerts:read', 'alerts:write', 'webhooks:read', 'webhooks:write'] });
  const api = client(svc.apiUrl, key.token);
  const created = async (route: string, body: Record<string, unknown>) => {
    const reply = await api<{ data: { id: number } }>('POST', route, { body });
    expect(reply.status, reply.text).toBe(201);
    return reply.body.data.id;
  };
  const cage = await created('/locations', { name: 'Cage', external_key: `CAGE-${orgId}` });
  const dock = await created('/locations', { name: 'Dock', external_key: `DOCK-${orgId}` });
  const drill = { id: await created('/assets', { name: 'Drill', external_key: `DRILL-${orgId}`, tags: [{ tag_type: 'barcode', value: `DRILL-${orgId}` }] }), tag: `DRILL-${orgId}` };
  const saw = { id: await created('/assets', { name: 'Saw', external_key: `SAW-${orgId}`, tags: [{ tag_type: 'barcode', value: `SAW-${orgId}` }] }), tag: `SAW-${orgId}` };
  const dwell = await created('/alert-rules', { name: 'dwell', kind: 'dwell_exceeded', location_id: cage, threshold_seconds: 60, asset_ids: [drill.id] });
  const silent = await created('/alert-rules', { name: 'silent', kind: 'not_seen', location_id: cage, threshold_seconds: 60, asset_ids: [saw.id] });
  const scans = await scanner(svc, orgId);
  const endpoint = async (p: string, eventTypes: string[]) => {
    const reply = await api<{ data: { id: number; secret: string } }>('POST', '/webhook-endpoints', { body: { url: receiver.url(p), event_types: eventTypes } });
    expect(reply.status, reply.text).toBe(201);
    return reply.body.data;
  };
  const alert = async (id: string) => {
    const reply = await api<{ data: Alert }>('GET', `/alerts/${id}`);
    expect(reply.status, reply.text).toBe(200);
    return reply.body.data;
  };
  const read = (location: number, asset: { tag: string }, observedAt: string) => scans.scan({ id: location }, [{ tag_type: 'barcode', value: asset.tag, observed_at: observedAt }]);
  return { orgId, api, cage, dock, drill, saw, dwell, silent, endpoint, alert, read };
}

/** The first request of each webhook-id to `p`, as (alert id, type). */
function eventsTo(p: string): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const r of receiver.to(p)) {
    if (seen.has(idOf(r))) continue;
    seen.add(idOf(r));
    out.push(`${String(r.json.data.id)} ${r.json.type}`);
  }
  return out;
}

/** The one request (first copy) of an alert's change to `p`. */
async function deliveredTo(p: string, alertId: string, type: string): Promise<Received> {
  return eventually(async () => {
    const got = receiver.to(p).find((r) => r.json.type === type && r.json.data.id === alertId);
    expect(got, `${type} of ${alertId} to ${p}`).toBeDefined();
    return got!;
  }, 30_000, 50);
}

/** Each (alert, type) to `p` under exactly one webhook-id (at-least-once sends may repeat it, never a second id). */
function expectOnceEach(p: string): void {
  const ids = new Map<string, Set<string>>();
  for (const r of receiver.to(p)) {
    const key = `${String(r.json.data.id)} ${r.json.type}`;
    ids.set(key, (ids.get(key) ?? new Set()).add(idOf(r)));
  }
  for (const [key, set] of ids) expect(set.size, `${key} sent under ${set.size} webhook-ids`).toBe(1);
}

describe('alert webhooks, end to end', () => {
  it('raised by a read, resolved by leaving (dwell) and by being seen again (not_seen): signed, in order, data = the API’s Alert; only to endpoints subscribed, and created before the change', { timeout: 120_000 }, async () => {
    const w = await world();
    const all = `/all-${w.orgId}`;
    const onlyResolved = `/resolved-${w.orgId}`;
    const moves = `/moves-${w.orgId}`;
    const later = `/later-${w.orgId}`;
    const endpoint = await w.endpoint(all, ALERTS);
    await w.endpoint(onlyResolved, ['alert.resolved']);
    await w.endpoint(moves, ['asset.first_seen', 'asset.moved']);
    const wh = new Webhook(endpoint.secret);

    // The drill entered the cage 10 minutes ago: past the dwell's 60 s, so the read raises it (at entry + 60 s).
    const entered = iso(600_000);
    await w.read(w.cage, w.drill, entered);
    const dwellId = `${w.dwell}-${w.drill.id}-1`;
    const dwellRaised = await deliveredTo(all, dwellId, 'alert.raised');
    expect(dwellRaised.json.data).toEqual(await w.alert(dwellId));
    expect(dwellRaised.json.data).toMatchObject({ kind: 'dwell_exceeded', status: 'open', asset_id: w.drill.id, location_id: w.cage, resolved_at: null, raised_at: new Date(Date.parse(entered) + 60_000).toISOString() });
    // The saw was read in the cage 10 minutes ago and not since: not_seen, raised by that read.
    await w.read(w.cage, w.saw, iso(600_000));
    const silentId = `${w.silent}-${w.saw.id}-1`;
    const silentRaised = await deliveredTo(all, silentId, 'alert.raised');
    expect(silentRaised.json.data).toEqual(await w.alert(silentId));

    // Created after both were raised: it gets their resolution only.
    await w.endpoint(later, ALERTS);

    // The drill leaves the cage; the saw is seen again.
    const left = iso(1_000);
    await w.read(w.dock, w.drill, left);
    const dwellResolved = await deliveredTo(all, dwellId, 'alert.resolved');
    expect(dwellResolved.json.data).toEqual(await w.alert(dwellId));
    expect(dwellResolved.json.data).toMatchObject({ status: 'resolved', resolved_at: left });
    await w.read(w.cage, w.saw, iso(500));
    const silentResolved = await deliveredTo(all, silentId, 'alert.resolved');
    expect(silentResolved.json.data).toEqual(await w.alert(silentId));
    expect(silentResolved.json.data).toMatchObject({ status: 'resolved' });

    // Signed: the standardwebhooks library verifies each with the endpoint's secret, and gives back the body.
    for (const r of [dwellRaised, silentRaised, dwellResolved, silentResolved]) {
      expect(wh.verify(r.body, r.headers as Record<string, string>)).toEqual(r.json);
      expect(r.headers['content-type']).toMatch(/^application\/json/);
    }
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(dwellRaised.body, dwellRaised.headers as Record<string, string>)).toThrow();

    await deliveredTo(later, silentId, 'alert.resolved');
    await deliveredTo(later, dwellId, 'alert.resolved');
    await deliveredTo(onlyResolved, silentId, 'alert.resolved');
    // Anything still on its way would have come with the resolutions queued after it: a moment more for stragglers.
    await new Promise((r) => setTimeout(r, 1500));
    expect(eventsTo(all)).toEqual([`${dwellId} alert.raised`, `${silentId} alert.raised`, `${dwellId} alert.resolved`, `${silentId} alert.resolved`]);
    expect(eventsTo(onlyResolved).sort()).toEqual([`${dwellId} alert.resolved`, `${silentId} alert.resolved`]);
    expect(eventsTo(later).sort()).toEqual([`${dwellId} alert.resolved`, `${silentId} alert.resolved`]);
    expect(receiver.to(moves).map((r) => r.json.type).filter((t) => t.startsWith('alert.'))).toEqual([]);
    expect(receiver.to(moves).length).toBeGreaterThan(0);
    expectOnceEach(all);
  });

  it('exactly once across `projections rebuild alerts` (two segments): the outbox comes back with the rows the cursor has not passed, identical (and equal to one segment’s), none it has; the cursor stays; changes after it flow on', { timeout: 300_000 }, async () => {
    const w = await world();
    const p = `/rebuild-${w.orgId}`;
    await w.endpoint(p, ALERTS);
    const dwellId = (n: number) => `${w.dwell}-${w.drill.id}-${n}`;
    const stay = async (n: number) => {
      await w.read(w.cage, w.drill, iso(3_600_000 - n * 600_000));
      await w.read(w.dock, w.drill, iso(3_600_000 - n * 600_000 - 300_000));
    };
    // Three stays in the cage past the dwell, each ended: six changes, followed and sent.
    for (let n = 1; n <= 3; n++) await stay(n);
    for (let n = 1; n <= 3; n++) await deliveredTo(p, dwellId(n), 'alert.resolved');
    const pool = svc.service.ctx.pool;
    const outbox = async (schema = 'read_model') =>
      (
        await pool.query<{ row: string }>(
          `SELECT concat_ws(' ', position_commit, position_prepare, alert_id, change, recorded_at, status, raised_at_rfc3339, resolved_at_rfc3339) AS row FROM ${schema}.alert_outbox WHERE org_id = $1 ORDER BY position_commit, position_prepare, alert_id, change`,
          [w.orgId],
        )
      ).rows.map((r) => r.row);
    // The webhooks role held back (its cursor's table locked against writes; a lock that takes no
    // transaction id, which would hold back every reader of the log): two more stays, four changes
    // in the outbox, not followed.
    const hold = new pg.Client({ connectionString: svc.db.url });
    await hold.connect();
    try {
      await hold.query('BEGIN');
      await hold.query('LOCK TABLE service.webhook_alert_cursor IN EXCLUSIVE MODE');
      for (let n = 4; n <= 5; n++) await stay(n);
      // Events after the last change that the alerts follow and that change no alert: the rebuild's batches end past the changes.
      for (const name of ['Yard', 'Gate']) { const r = await w.api('POST', '/locations', { body: { name, external_key: `${name.toUpperCase()}-${w.orgId}` } }); expect(r.status, r.text).toBe(201); }
      const before = await eventually(async () => {
        const rows = await outbox();
        expect(rows.length).toBe(10);
        return rows;
      }, 30_000, 50);
      // The cursor stands after the sixth row (it moved in steps of whole rows), before the seventh.
      const ahead = before.slice(6);
      expect(ahead.map((row) => row.split(' ')[2] + ' ' + row.split(' ')[3])).toEqual([4, 5].flatMap((n) => [`${dwellId(n)} raised`, `${dwellId(n)} resolved`]));

      // The indexes a rebuild or a replay makes after the log is replayed (indexesAfterReplay): all there, as they were.
      const indexes = async (schema: string) =>
        (await pool.query<{ d: string }>(`SELECT replace(indexdef, $1, 'S.') AS d FROM pg_indexes WHERE schemaname = $2 AND tablename = 'alerts' ORDER BY indexname`, [`${schema}.`, schema])).rows.map((r) => r.d);
      const indexesBefore = await indexes('read_model');
      expect(indexesBefore).toHaveLength(5);
      // One segment writes the same rows as two: a replay of the log in one segment, beside; neither writes a row the cursor has passed.
      await replayProjections({ store: svc.service.ctx.store, pool, log: createLogger('silent'), projections: [alertsProjection], until: new Date(), into: 'alerts_one_segment', replace: true });
      expect(await outbox('alerts_one_segment')).toEqual(ahead);
      expect(await indexes('alerts_one_segment')).toEqual(indexesBefore);

      const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        const env = { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1', PROJECTION_SEGMENTS: SEGMENTS };
        execFile(process.execPath, [path.join(ROOT, 'bin', 'tracking.js'), 'projections', 'rebuild', 'alerts', '--json'], { cwd: ROOT, env, timeout: 240_000 }, (error, stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
        );
      });
      expect(run.code, run.stderr).toBe(0);
      expect((JSON.parse(run.stdout) as { rebuilt: string[] }).rebuilt).toEqual(['alerts']);
      // The rebuilt outbox holds the rows still to be followed, with the same keys, and none the cursor has passed.
      expect(await outbox()).toEqual(ahead);
      expect(await indexes('read_model')).toEqual(indexesBefore);
      await hold.query('COMMIT');
    } finally {
      await hold.end();
    }

    // Let go, the role sends the held changes, once; a change after the rebuild too; nothing before them again.
    for (let n = 4; n <= 5; n++) await deliveredTo(p, dwellId(n), 'alert.resolved');
    await w.read(w.cage, w.drill, iso(120_000));
    await deliveredTo(p, dwellId(6), 'alert.raised');
    await new Promise((r) => setTimeout(r, 2000));
    expect(eventsTo(p)).toEqual([1, 2, 3, 4, 5].flatMap((n) => [`${dwellId(n)} alert.raised`, `${dwellId(n)} alert.resolved`]).concat(`${dwellId(6)} alert.raised`));
    expectOnceEach(p);

    // The prune deletes what the cursor has passed.
    await pruneAlertOutbox(pool);
    expect(await outbox()).toEqual([]);
  });
});
