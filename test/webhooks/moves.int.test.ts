import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads } from '../../shared/domain/scans/read-codec.js';
import { comparePositions, type Position } from '../../shared/event-store/port.js';
import { readCheckpoint } from '../../shared/projection/checkpoints.js';
import { createEndpoint } from '../../services/webhooks/endpoints.js';
import { eventually } from '../support/kafka.js';
import { startTestService, type TestService } from '../support/service.js';
import { webhookReceiver, type Received, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The events follow the current location exactly as the report shows it (docs/design.md
 * "Webhooks"): random reads of two assets at three locations (ties of observed time, the same read
 * delivered again, late reads) arrive one by one in a random order; after each, the report's
 * current location is read. The moves an endpoint receives are exactly the changes of those
 * locations, in order, each with the observed time the report then shows.
 */

let svc: TestService;
let receiver: WebhookReceiver;
beforeAll(async () => {
  svc = await startTestService('webhook_moves', { ROLES: 'projector,webhooks' });
  receiver = await webhookReceiver();
});
afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

interface Read {
  asset: number;
  location: number;
  second: number;
}

const BASE_US = Date.UTC(2026, 4, 25, 14, 0, 0) * 1000;

/** One read as a fixed reader's scan event: capture point per location, tag per asset. */
async function append(orgId: number, read: Read): Promise<Position> {
  const raw = [{ tag_type: 'rfid', value: `E2801160600002084D9F34A${read.asset}`, observedUs: BASE_US + read.second * 1_000_000, rssi: -60, capturePoint: `door-${read.location}` }];
  const { capturePoints, ...encoded } = encodeReads(raw, () => ({ assetId: read.asset, cause: null }));
  const data: ScansRecordedData = { org_id: orgId, location_id: read.location, source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints }, ...encoded, at: new Date().toISOString() };
  const appended = await svc.service.ctx.store.appendToStreams([{ streamId: locationScansStream(orgId, read.location), expectedRevision: 'any', events: [{ type: ScansRecorded.type, data }] }]);
  return appended.position;
}

async function reportOf(orgId: number): Promise<Map<number, { location: number; lastSeen: string }>> {
  const { rows } = await svc.service.ctx.pool.query<{ asset_id: number; location_id: number; last_seen: Date }>('SELECT asset_id, location_id, last_seen FROM asset_locations WHERE org_id = $1', [orgId]);
  return new Map(rows.map((r) => [r.asset_id, { location: r.location_id, lastSeen: r.last_seen.toISOString() }]));
}

function eventsOf(requests: Received[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const r of requests) {
    const id = r.headers['webhook-id'] as string;
    if (seen.has(id)) continue;
    seen.add(id);
    const d = r.json.data;
    out.push(
      r.json.type === 'asset.moved'
        ? `${String(d.asset_id)} moved ${String(d.from_location_id)}>${String(d.to_location_id)} at ${String(d.observed_at)}`
        : `${String(d.asset_id)} first_seen ${String(d.location_id)} at ${String(d.observed_at)}`,
    );
  }
  return out;
}

let org = 70_000;

describe('webhook moves follow the report', () => {
  it('random reads in random arrival orders give exactly the moves the report shows', { timeout: 240_000 }, async () => {
    const read = fc.record({ asset: fc.integer({ min: 1, max: 2 }), location: fc.integer({ min: 1, max: 3 }), second: fc.integer({ min: 0, max: 3 }) });
    // A tie of observed time at two locations, then the first read delivered again: the report keeps the second.
    const tieThenRepeat = [{ asset: 1, location: 1, second: 2 }, { asset: 1, location: 2, second: 2 }, { asset: 1, location: 1, second: 2 }];
    await fc.assert(
      fc.asyncProperty(fc.array(read, { minLength: 1, maxLength: 14 }), async (reads) => {
        const orgId = ++org;
        const path = `/moves-${orgId}`;
        await createEndpoint(svc.service.ctx.pool, svc.service.ctx.keyEncryption.keys, orgId, { url: receiver.url(path), description: null, eventTypes: ['asset.first_seen', 'asset.moved'], notSeenAfterSeconds: 3600 });
        const expected: string[] = [];
        const current = new Map<number, number>();
        let last: Position | null = null;
        for (const r of reads) {
          last = await append(orgId, r);
          await svc.service.ctx.checkpoints.waitForCheckpoint(last, { projections: ['tracking'] });
          for (const [asset, now] of await reportOf(orgId)) {
            const before = current.get(asset);
            if (before === now.location) continue;
            expected.push(before === undefined ? `${asset} first_seen ${now.location} at ${now.lastSeen}` : `${asset} moved ${before}>${now.location} at ${now.lastSeen}`);
            current.set(asset, now.location);
          }
        }
        // Everything the webhooks subscriber will queue is queued, and then sent.
        await eventually(async () => expect(comparePositions(await readCheckpoint(svc.service.ctx.pool, 'read_model', 'webhooks'), last!)).toBeGreaterThanOrEqual(0), 20_000, 20);
        await eventually(async () => {
          const { rows } = await svc.service.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM service.webhook_deliveries WHERE org_id = $1 AND status = 'pending'`, [orgId]);
          expect(rows[0]!.n).toBe(0);
        }, 20_000, 20);
        const got = eventsOf(receiver.to(path));
        for (const asset of [1, 2]) {
          const mine = (list: string[]) => list.filter((e) => e.startsWith(`${asset} `));
          expect(mine(got)).toEqual(mine(expected));
        }
        expect(got.length).toBe(expected.length);
      }),
      { numRuns: 30, examples: [[tieThenRepeat]] },
    );
  });
});
