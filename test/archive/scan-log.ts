import { AssetCreated, AssetRenamed, assetStream } from '../../shared/domain/assets/events.js';
import { LocationCreated } from '../../shared/domain/locations/events.js';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import type { EventData, EventStore, StreamAppend } from '../../shared/event-store/port.js';
import { seededRandom } from '../../shared/random.js';

/**
 * A log of fixed-reader scans, appended straight to the store the way ingest writes them (as the
 * replay bench does): locations and assets, then scan events at the locations where assets are
 * parked, now and then one moved, a few late reads; and master data in between (an asset created
 * or renamed every `masterEvery` scan appends), so that scan and master-data events interleave in
 * the log. Deterministic for a seed, apart from the ids it is given.
 */
export interface ScanLogPlan {
  orgId: number;
  /** Location and asset ids (distinct within the org). */
  firstId: number;
  locations: number;
  assets: number;
  scanEvents: number;
  readsPerEvent?: number;
  /** Scan events per append (each append writes several location streams). */
  perAppend?: number;
  masterEvery?: number;
  seed?: number;
  /** Microseconds since the epoch of the first read. */
  startUs?: number;
  onProgress?: (scanEvents: number) => void;
}

const AT = '2026-01-01T00:00:00.000Z';
const META = { schema_version: 1 };

export async function appendScanLog(store: EventStore, plan: ScanLogPlan): Promise<{ events: number; reads: number }> {
  const rnd = seededRandom(plan.seed ?? 7);
  const perAppend = plan.perAppend ?? 50;
  const readsPerEvent = plan.readsPerEvent ?? 3;
  const masterEvery = plan.masterEvery ?? 5;
  const { orgId } = plan;
  const locationIds = Array.from({ length: plan.locations }, (_, i) => plan.firstId + i);
  const assetIds = Array.from({ length: plan.assets }, (_, i) => plan.firstId + plan.locations + i);
  let events = 0;
  let reads = 0;
  const append = async (appends: StreamAppend[]) => {
    await store.appendToStreams(appends);
    events += appends.reduce((n, a) => n + a.events.length, 0);
  };
  const assetCreated = (id: number): StreamAppend => ({
    streamId: assetStream(orgId, id),
    expectedRevision: 'no_stream',
    events: [
      {
        type: AssetCreated.type,
        metadata: META,
        data: { org_id: orgId, asset_id: id, external_key: `A-${id}`, minted: false, name: `Asset ${id}`, description: null, is_active: true, valid_from: null, valid_to: null, metadata: {}, at: AT },
      },
    ],
  });
  await append(
    locationIds.map((id, j) => ({
      streamId: `location-${orgId}-${id}`,
      expectedRevision: 'no_stream',
      events: [
        {
          type: LocationCreated.type,
          metadata: META,
          data: { org_id: orgId, location_id: id, external_key: `L-${id}`, name: `Location ${id}`, description: null, parent_id: j === 0 ? null : locationIds[0]!, is_active: true, valid_from: null, valid_to: null, at: AT },
        },
      ],
    })),
  );
  // Half the assets exist from the start; the rest are created between scans.
  const created = Math.max(1, Math.floor(plan.assets / 2));
  for (let i = 0; i < created; i += 500) await append(assetIds.slice(i, Math.min(created, i + 500)).map(assetCreated));
  let existing = created;
  const home = assetIds.map((_, i) => i % plan.locations);
  const parked: number[][] = Array.from({ length: plan.locations }, () => []);
  for (let i = 0; i < existing; i++) parked[home[i]!]!.push(i);
  let us = plan.startUs ?? Date.UTC(2026, 0, 1) * 1000;
  let renames = 0;
  for (let start = 0, round = 0; start < plan.scanEvents; start += perAppend, round++) {
    const byStream = new Map<string, EventData[]>();
    for (let n = start; n < Math.min(plan.scanEvents, start + perAppend); n++) {
      const l = Math.floor(rnd() * plan.locations);
      const here = parked[l]!;
      if (rnd() < 0.02 || here.length === 0) {
        const moved = Math.floor(rnd() * existing);
        const from = parked[home[moved]!]!;
        from.splice(from.indexOf(moved), 1);
        home[moved] = l;
        here.push(moved);
      }
      const late = rnd() < 0.02;
      const batch: RawRead[] = [];
      for (let r = 0; r < readsPerEvent; r++) {
        us += 1 + Math.floor(rnd() * 2_000_000);
        const asset = here[Math.floor(rnd() * here.length)]!;
        batch.push({ tag_type: 'rfid', value: `E280${String(assetIds[asset]).padStart(8, '0')}`, observedUs: late ? us - 3_600_000_000 : us, rssi: -50 - Math.floor(rnd() * 30), capturePoint: `door-${l}` });
      }
      reads += batch.length;
      const { capturePoints, ...encoded } = encodeReads(batch, (read) => ({ assetId: Number(read.value.slice(4)), cause: null }));
      const data: ScansRecordedData = { org_id: orgId, location_id: locationIds[l]!, source: { kind: 'reader', reader_id: `reader-${l}`, capture_points: capturePoints }, ...encoded, at: AT };
      const stream = locationScansStream(orgId, locationIds[l]!);
      byStream.set(stream, [...(byStream.get(stream) ?? []), { type: ScansRecorded.type, metadata: META, data }]);
    }
    await append([...byStream].map(([streamId, list]) => ({ streamId, expectedRevision: 'any', events: list })));
    plan.onProgress?.(Math.min(plan.scanEvents, start + perAppend));
    if (round % masterEvery === masterEvery - 1) {
      if (existing < plan.assets) {
        await append([assetCreated(assetIds[existing]!)]);
        parked[home[existing]!]!.push(existing);
        existing++;
      } else {
        const id = assetIds[renames++ % existing]!;
        await append([
          {
            streamId: assetStream(orgId, id),
            expectedRevision: 'any',
            events: [{ type: AssetRenamed.type, metadata: META, data: { org_id: orgId, asset_id: id, external_key: `A-${id}-r${renames}`, previous_external_key: `A-${id}`, at: AT } }],
          },
        ]);
      }
    }
  }
  return { events, reads };
}
