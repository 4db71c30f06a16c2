import { execFile } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { alertsProjection } from '../../projections/alerts/projection.js';
import { ALERTS_CLOCK_STREAM, AlertClockTicked, alertRulesStream } from '../../shared/domain/alerts/events.js';
import { comparePositions, type Position, type StreamAppend } from '../../shared/event-store/port.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { createLogger } from '../../shared/logger.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import { replayProjections } from '../../shared/projection/replay.js';
import { segmentName } from '../../shared/projection/segments.js';
import { type SetAsideStream } from '../../shared/projection/set-aside.js';
import { seededRandom as random } from '../../shared/random.js';
import { createOrg } from '../support/auth.js';
import { processWorld, ServiceProcesses } from '../support/processes.js';
import { placedReadsAppend } from '../support/scans.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';

/**
 * The alerts subscriber in real service processes (docs/design.md "Alerts", "Alerts: time as an
 * event"): the ticker of a `ROLES=projector` process raises a not_seen alert within 5 s of its
 * raised_at; a projector killed with SIGKILL in the middle of the log, and another started after
 * it, leave exactly the alerts a replay of the log gives (none lost, none twice); a rule event that
 * does not fit its schema is set aside and listed by `projections failures`, the others flow on.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const world = processWorld('alerts_processes', 120_000);
const log = createLogger('silent');
const S = 1_000_000;
// Every process of this file runs `alerts` as 2 segments (a process with another number would refuse its checkpoints).
const split = new ServiceProcesses(() => world.db.url, { PROJECTION_SEGMENTS: 'alerts=2' });

afterAll(async () => {
  await split.stopAll();
});

const tagOf = (assetId: number) => `E28011606000020900AA${String(assetId).padStart(4, '0')}`;

function locationCreated(orgId: number, id: number, parent: number | null): StreamAppend {
  return {
    streamId: `location-${orgId}-${id}`,
    expectedRevision: 'any',
    events: [
      {
        type: 'LocationCreated',
        data: { org_id: orgId, location_id: id, external_key: `L-${id}`, name: `L ${id}`, description: null, parent_id: parent, is_active: true, valid_from: null, valid_to: null, at: new Date().toISOString() },
      },
    ],
  };
}

function ruleCreated(orgId: number, ruleId: number, kind: string, locationId: number, thresholdSeconds: number | null): StreamAppend {
  return {
    streamId: alertRulesStream(orgId),
    expectedRevision: 'any',
    events: [
      {
        type: 'AlertRuleCreated',
        data: { org_id: orgId, rule_id: ruleId, name: `rule ${ruleId}`, kind, location_id: locationId, threshold_seconds: thresholdSeconds, asset_ids: null, is_active: true, at: new Date().toISOString() },
      },
    ],
  };
}

async function waitFor<T>(probe: () => Promise<T | null>, timeoutMs: number, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** The alerts of an organization, each row as text, sorted. */
async function alertRows(schema: string, orgId: number): Promise<string[]> {
  const { rows } = await world.ctx.pool.query<{ row: string }>(
    `SELECT concat_ws(' ', alert_id, rule_id, kind, asset_id, location_id, raised_at_rfc3339, status, resolved_at_rfc3339, raised_position) AS row
       FROM ${pg.escapeIdentifier(schema)}.alerts WHERE org_id = $1`,
    [orgId],
  );
  return rows.map((r) => r.row).sort();
}

async function caughtUp(segments: number, head: Position): Promise<boolean> {
  for (let index = 0; index < segments; index++) {
    const at = await readCheckpoint(world.ctx.pool, 'read_model', segmentName('alerts', index, segments));
    if (comparePositions(at, head) < 0) return false;
  }
  return true;
}

describe('alerts subscriber in service processes', () => {
  it('the ticker raises a not_seen alert within 5 s of its raised_at', { timeout: 180_000 }, async () => {
    const projector = await split.start('projector');
    try {
      const { ctx } = world;
      const org = await createOrg(ctx, 'Alerts ticker');
      await ctx.store.appendToStreams([locationCreated(org.id, 1, null), locationCreated(org.id, 2, 1), ruleCreated(org.id, 1, 'not_seen', 1, 60)]);
      // Reads observed 58 s ago: the silence passes 60 s two seconds from now.
      const observedUs = Date.now() * 1000 - 58 * S;
      await ctx.store.appendToStreams([placedReadsAppend(org.id, 2, [{ tag: tagOf(1), assetId: 1, us: observedUs }])]);
      const raisedMs = Math.floor((observedUs + 60 * S) / 1000);
      const seen = await waitFor(async () => {
        const { rows } = await ctx.pool.query<{ alert_id: string; kind: string; location_id: number; raised_us: string; status: string }>(
          `SELECT alert_id, kind, location_id, (extract(epoch FROM raised_at) * 1000000)::bigint::text AS raised_us, status FROM read_model.alerts WHERE org_id = $1`,
          [org.id],
        );
        return rows.length > 0 ? { row: rows[0]!, at: Date.now() } : null;
      }, 30_000);
      expect(seen.row).toEqual({ alert_id: '1-1-1', kind: 'not_seen', location_id: 2, raised_us: String(observedUs + 60 * S), status: 'open' });
      // Raised when the clock passed it (never before), and within 5 s of it.
      expect(seen.at).toBeGreaterThanOrEqual(raisedMs);
      expect(seen.at - raisedMs).toBeLessThan(5_000);
      const ticks = await ctx.store.readStream(ALERTS_CLOCK_STREAM);
      expect(ticks.some((t) => t.type === AlertClockTicked.type && (t.data as { until_us: number }).until_us >= observedUs + 60 * S)).toBe(true);
    } finally {
      await split.stop(projector);
    }
  });

  it('a projector killed mid-stream and another after it leave the alerts of a replay: none lost, none twice; a poison rule event is set aside', { timeout: 300_000 }, async () => {
    const { ctx } = world;
    // The organizations, their tree and rules, applied by a projector that then stops.
    const setup = await split.start('projector');
    const org = await createOrg(ctx, 'Alerts kill');
    const poisoned = await createOrg(ctx, 'Alerts poison');
    const base = await ctx.store.appendToStreams([
      locationCreated(org.id, 1, null),
      locationCreated(org.id, 2, 1),
      locationCreated(org.id, 3, null),
      {
        ...ruleCreated(org.id, 1, 'entered', 1, null),
        events: [ruleCreated(org.id, 1, 'entered', 1, null), ruleCreated(org.id, 2, 'left', 1, null), ruleCreated(org.id, 3, 'dwell_exceeded', 1, 60)].flatMap((a) => a.events),
      },
    ]);
    await waitFor(async () => ((await caughtUp(2, base.position)) ? true : null), 60_000);
    await split.stop(setup);
    // A rule event the catalogue would refuse, appended past it (as a bad version or a bug could): its stream is set aside.
    const raw = new PostgresEventStore(ctx.pool, world.db.url);
    await raw.appendToStream(alertRulesStream(poisoned.id), [{ type: 'AlertRuleCreated', data: { org_id: poisoned.id, rule_id: 1, kind: 'bogus', at: new Date().toISOString() } }]);
    // 30 assets walking in and out of the zone: thousands of entered and left alerts, in more
    // events than a follower's batch (5,000), so that the kill finds part of the log to apply.
    const rnd = random(35);
    let us = Date.now() * 1000 - 3600 * S;
    let head: Position | null = null;
    for (let chunk = 0; chunk < 80; chunk++) {
      // One append of each location's stream a chunk, with its events in order.
      const appends = new Map<number, StreamAppend>();
      for (let i = 0; i < 100; i++) {
        const location = 1 + Math.floor(rnd() * 3);
        us += Math.floor(rnd() * 2 * S);
        const reads = Array.from({ length: 1 + Math.floor(rnd() * 3) }, (_, k) => {
          const assetId = 1 + Math.floor(rnd() * 30);
          return { tag: tagOf(assetId), assetId, us: us + k };
        });
        const one = placedReadsAppend(org.id, location, [...new Map(reads.map((r) => [r.assetId, r])).values()]);
        const same = appends.get(location);
        if (same) same.events.push(...one.events);
        else appends.set(location, one);
      }
      head = (await ctx.store.appendToStreams([...appends.values()])).position;
    }

    const first = await split.start('projector');
    let killedAt: Position | null = null;
    await waitFor(async () => {
      const at = await readCheckpoint(ctx.pool, 'read_model', segmentName('alerts', 0, 2));
      if (comparePositions(at, base.position) > 0) {
        first.child.kill('SIGKILL');
        killedAt = at;
        return true;
      }
      return null;
    }, 120_000, 10);
    await first.exited;
    await split.stop(first);
    // Killed with part of the log still to apply.
    expect(await caughtUp(2, head!)).toBe(false);
    expect(killedAt).not.toBeNull();

    const second = await split.start('projector');
    await waitFor(async () => ((await caughtUp(2, head!)) ? true : null), 180_000, 100);
    await split.stop(second);

    const into = 'alerts_after_kill';
    await replayProjections({ store: ctx.store, pool: ctx.pool, log, projections: [alertsProjection], until: new Date(), into, replace: true });
    const replayed = await alertRows(into, org.id);
    expect(replayed.length).toBeGreaterThan(500);
    expect(await alertRows('read_model', org.id)).toEqual(replayed);

    const failures = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const env = { ...process.env, DATABASE_URL: world.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' };
      execFile(process.execPath, [path.join(ROOT, 'bin', 'tracking.js'), 'projections', 'failures', '--json'], { cwd: ROOT, env, timeout: 120_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
      );
    });
    expect(failures.code, failures.stderr).toBe(0);
    const listed = (JSON.parse(failures.stdout) as SetAsideStream[]).filter((f) => f.stream === alertRulesStream(poisoned.id));
    // Each segment follows the rules: each sets the stream aside; so does the rules' own projection.
    expect(listed.map((f) => [f.projection, f.event_type]).sort()).toEqual([
      ['alert-rules', 'AlertRuleCreated'],
      [segmentName('alerts', 0, 2), 'AlertRuleCreated'],
      [segmentName('alerts', 1, 2), 'AlertRuleCreated'],
    ]);
  });
});
