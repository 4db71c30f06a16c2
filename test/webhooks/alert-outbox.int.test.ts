import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { atOrBehind } from '../../projections/alerts/projection.js';
import { alertSegmentNames, followAlertOutbox, pruneAlertOutbox } from '../../services/webhooks/alerts.js';
import { createEndpoint } from '../../services/webhooks/endpoints.js';
import { segmentOfKey } from '../../shared/projection/segments.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The webhooks role's follower of the alerts' outbox (docs/design.md "Webhooks", "Alerts and
 * webhooks") on real Postgres, against a model: the outbox is written as two segments of `alerts`
 * would write it (each its own assets' rows, each with its own checkpoint, one segment lagging
 * behind the other at random), emptied and written again as a rebuild does, pruned, and followed
 * in random steps of random sizes. Whatever the interleaving, the deliveries queued are every
 * change once, in the outbox's order (log position, then org, alert, change). No `alerts`
 * projection and no webhooks role run here: the test writes the outbox and the checkpoints.
 */

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('webhook_alert_outbox', { ROLES: 'api' });
});
afterAll(async () => {
  await svc?.stop();
});

const SEGMENTS = alertSegmentNames({ all: 1, byName: { alerts: 2 } });

interface Change {
  /** Index of the causing event: its position is (1000 + i, i). */
  event: number;
  alertId: string;
  change: 'raised' | 'resolved';
  assetId: number;
}

type Step = { kind: 'write'; segment: number; events: number } | { kind: 'follow'; limit: number } | { kind: 'rebuild' } | { kind: 'prune' };

let org = 50_000;

/** Changes of `events` events: each event changes 0..3 alerts of assets 1..6; an alert is raised, then (maybe in the same event) resolved. */
const changesOf = (plan: Array<Array<{ asset: number; resolve: 'no' | 'same' | 'later' }>>): Change[] => {
  const changes: Change[] = [];
  const n = new Map<number, number>();
  const pending: Array<{ alertId: string; assetId: number }> = [];
  plan.forEach((touches, event) => {
    for (const t of touches) {
      if (t.resolve === 'later' && pending.length > 0) {
        const p = pending.shift()!;
        changes.push({ event, alertId: p.alertId, change: 'resolved', assetId: p.assetId });
        continue;
      }
      n.set(t.asset, (n.get(t.asset) ?? 0) + 1);
      const alertId = `1-${t.asset}-${n.get(t.asset)}`;
      changes.push({ event, alertId, change: 'raised', assetId: t.asset });
      if (t.resolve === 'same') changes.push({ event, alertId, change: 'resolved', assetId: t.asset });
      else pending.push({ alertId, assetId: t.asset });
    }
  });
  return changes;
};

/** The outbox's order: position, org, alert id, change. */
const byKey = (a: Change, b: Change) => a.event - b.event || (a.alertId < b.alertId ? -1 : a.alertId > b.alertId ? 1 : 0) || (a.change < b.change ? -1 : a.change > b.change ? 1 : 0);

describe('the alert outbox, followed', () => {
  it('every change once, in order, whatever the segments lag, a rebuild rewrites or a prune deletes', { timeout: 240_000 }, async () => {
    const pool = svc.service.ctx.pool;
    const touch = fc.record({ asset: fc.integer({ min: 1, max: 6 }), resolve: fc.constantFrom<'no' | 'same' | 'later'>('no', 'same', 'later', 'later') });
    const step = fc.oneof(
      fc.record({ kind: fc.constant('write' as const), segment: fc.integer({ min: 0, max: 1 }), events: fc.integer({ min: 1, max: 6 }) }),
      fc.record({ kind: fc.constant('follow' as const), limit: fc.integer({ min: 1, max: 5 }) }),
      fc.constant({ kind: 'rebuild' as const }),
      fc.constant({ kind: 'prune' as const }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(touch, { maxLength: 3 }), { minLength: 1, maxLength: 25 }), fc.array(step, { maxLength: 30 }), async (plan, steps: Step[]) => {
        const orgId = ++org;
        await pool.query('DELETE FROM service.webhook_alert_cursor');
        await pool.query('TRUNCATE alert_outbox');
        await pool.query(`DELETE FROM projection_checkpoints WHERE name = ANY ($1::text[])`, [SEGMENTS]);
        const endpoint = await createEndpoint(pool, svc.service.ctx.keyEncryption.keys, orgId, {
          url: 'http://127.0.0.1:9/alerts',
          description: null,
          eventTypes: ['alert.raised', 'alert.resolved'],
          notSeenAfterSeconds: 3600,
        });
        const changes = changesOf(plan);
        const segmentOf = (c: Change) => segmentOfKey(`${orgId}/${c.assetId}`, 2);
        // How many events each segment has applied.
        const applied = [0, 0];
        const insert = async (rows: Change[]) => {
          if (rows.length === 0) return;
          await pool.query(
            `INSERT INTO alert_outbox (position_commit, position_prepare, org_id, alert_id, change, recorded_at, rule_id, kind, asset_id, location_id, raised_at, status)
             SELECT 1000 + e, e, $1, a, c, now() + interval '1 hour', 1, 'dwell_exceeded', asset, 1, now(), CASE c WHEN 'raised' THEN 'open' ELSE 'resolved' END
               FROM unnest($2::int[], $3::text[], $4::text[], $5::int[]) AS t(e, a, c, asset)`,
            [orgId, rows.map((r) => r.event), rows.map((r) => r.alertId), rows.map((r) => r.change), rows.map((r) => r.assetId)],
          );
        };
        const checkpoint = async (segment: number) =>
          pool.query(
            `INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position`,
            [SEGMENTS[segment], applied[segment] === 0 ? '0/0' : `${1000 + applied[segment]! - 1}/${applied[segment]! - 1}`],
          );
        const write = async (segment: number, events: number) => {
          const from = applied[segment]!;
          const to = Math.min(plan.length, from + events);
          await insert(changes.filter((c) => segmentOf(c) === segment && c.event >= from && c.event < to));
          applied[segment] = to;
          await checkpoint(segment);
        };
        // The segments start at the log's start (a checkpoint each), before the follower's first step.
        await checkpoint(0);
        await checkpoint(1);
        // The follower's first step makes the cursor at the horizon: here, the log's start.
        await followAlertOutbox(pool, SEGMENTS);
        for (const s of steps) {
          if (s.kind === 'write') await write(s.segment, s.events);
          else if (s.kind === 'follow') await followAlertOutbox(pool, SEGMENTS, s.limit);
          else if (s.kind === 'prune') await pruneAlertOutbox(pool, 2);
          else {
            // A rebuild: the outbox emptied and written again, each segment's rows up to its checkpoint.
            await pool.query('TRUNCATE alert_outbox');
            await insert(changes.filter((c) => c.event < applied[segmentOf(c)]!));
          }
        }
        await write(0, plan.length);
        await write(1, plan.length);
        while ((await followAlertOutbox(pool, SEGMENTS, 7)).followed > 0);
        const { rows } = await pool.query<{ event_type: string; body: string }>(`SELECT event_type, body FROM service.webhook_deliveries WHERE endpoint_id = $1 ORDER BY id`, [endpoint.id]);
        const got = rows.map((r) => `${(JSON.parse(r.body) as { data: { id: string } }).data.id} ${r.event_type}`);
        expect(got).toEqual([...changes].sort(byKey).map((c) => `${c.alertId} alert.${c.change}`));
        // Pruned up to the cursor: nothing left behind it.
        await pruneAlertOutbox(pool);
        expect((await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM alert_outbox')).rows[0]!.n).toBe(0);
      }),
      { numRuns: 60 },
    );
  });
  it('the alerts projection skips the rows at or behind the cursor by the outbox’s own order (atOrBehind agrees with Postgres on random keys)', { timeout: 60_000 }, async () => {
    const pool = svc.service.ctx.pool;
    const key = fc.record({
      commit: fc.bigInt({ min: 0n, max: 2n ** 62n }).map(String),
      prepare: fc.bigInt({ min: 0n, max: 2n ** 62n }).map(String),
      orgId: fc.integer({ min: 1, max: 2_147_483_647 }),
      alertId: fc.stringMatching(/^[0-9]{1,4}-[0-9]{1,4}-[0-9]{1,3}$/),
      change: fc.constantFrom('raised', 'resolved', ''),
    });
    // Near keys too: equal parts up to a random depth, so that every column decides somewhere.
    const pair = fc.tuple(key, key, fc.integer({ min: 0, max: 5 })).map(([a, b, same]) => {
      const parts = ['commit', 'prepare', 'orgId', 'alertId', 'change'] as const;
      const c = { ...b };
      for (const part of parts.slice(0, same)) (c as Record<string, unknown>)[part] = a[part];
      return [a, c] as const;
    });
    await fc.assert(
      fc.asyncProperty(fc.array(pair, { minLength: 1, maxLength: 50 }), async (pairs) => {
        const { rows } = await pool.query<{ behind: boolean }>(
          `SELECT (a.c, a.p, a.o, a.i COLLATE "C", a.x COLLATE "C") <= (b.c, b.p, b.o, b.i COLLATE "C", b.x COLLATE "C") AS behind
             FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::int[], $9::text[], $10::text[]) WITH ORDINALITY
                  AS t(ac, ap, ao, ai, ax, bc, bp, bo, bi, bx, n),
                  LATERAL (SELECT t.ac, t.ap, t.ao, t.ai, t.ax) AS a(c, p, o, i, x),
                  LATERAL (SELECT t.bc, t.bp, t.bo, t.bi, t.bx) AS b(c, p, o, i, x)
            ORDER BY t.n`,
          [
            ...(['commit', 'prepare', 'orgId', 'alertId', 'change'] as const).map((part) => pairs.map(([a]) => a[part])),
            ...(['commit', 'prepare', 'orgId', 'alertId', 'change'] as const).map((part) => pairs.map(([, b]) => b[part])),
          ],
        );
        expect(pairs.map(([a, b]) => atOrBehind(a, b))).toEqual(rows.map((r) => r.behind));
      }),
      { numRuns: 100 },
    );
  });
});
