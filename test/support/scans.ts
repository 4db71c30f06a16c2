import { randomUUID } from 'node:crypto';
import { ScansRecorded, locationScansStream, type ScansRecordedData } from '../../shared/domain/scans/events.js';
import { encodeReads, type RawRead } from '../../shared/domain/scans/read-codec.js';
import type { StreamAppend } from '../../shared/event-store/port.js';
import { mintApiKey } from './auth.js';
import type { TestService } from './service.js';

/** A handheld read as POST /ingest/v1/scans takes it. */
export interface HandheldRead {
  tag_type: string;
  value: string;
  observed_at?: string;
  rssi?: number;
}

export interface HandheldReply {
  status: number;
  body: { data?: { accepted: number; unknown: number; duplicate: boolean }; error?: { type: string; detail: string; fields?: Array<{ field: string; code: string }> } };
}

/**
 * Submits handheld scans to a started test service's ingest listener, the way a handheld backend
 * does: real HTTP, a `scans:write` key of the org.
 */
export function handheld(svc: TestService, token: string) {
  return async function submit(body: Record<string, unknown>): Promise<HandheldReply> {
    const response = await fetch(`${svc.ingestUrl}/scans`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as HandheldReply['body'] };
  };
}

/** A `scans:write` key for the org and a function that places reads at a location (by id). */
export async function scanner(svc: TestService, orgId: number) {
  const key = await mintApiKey(svc.service.ctx, { orgId, scopes: ['scans:write'] });
  const submit = handheld(svc, key.token);
  return {
    token: key.token,
    submit,
    /** Reads at one location in one submission; throws unless 202. */
    async scan(location: { id: number } | { external_key: string }, reads: HandheldRead[]) {
      const reply = await submit({ submission_id: randomUUID(), device_id: 'test-handheld', location, reads });
      if (reply.status !== 202) throw new Error(`handheld submission answered ${reply.status}: ${JSON.stringify(reply.body)}`);
      return reply.body.data!;
    },
  };
}

/** A read a fixed reader placed: its tag's value, the asset the tag resolves to, when (µs since the epoch). */
export interface PlacedRead {
  tag: string;
  assetId: number;
  us: number;
}

/**
 * One ScansRecorded event of a fixed reader (`reader-1`, capture point `door-<location id>`) at a
 * location, as ingest records it, for tests that append straight to the log: each read resolved
 * to its asset by its tag (RFID values compared as ingest does, upper-cased).
 */
export function placedReadsAppend(orgId: number, locationId: number, reads: readonly PlacedRead[]): StreamAppend {
  const raw: RawRead[] = reads.map((r) => ({ tag_type: 'rfid', value: r.tag, observedUs: r.us, rssi: -60, capturePoint: `door-${locationId}` }));
  const byTag = new Map(reads.map((r) => [r.tag.toUpperCase(), r.assetId]));
  const { capturePoints, ...encoded } = encodeReads(raw, (read) => ({ assetId: byTag.get(read.value.toUpperCase())!, cause: null }));
  const data: ScansRecordedData = {
    org_id: orgId,
    location_id: locationId,
    source: { kind: 'reader', reader_id: 'reader-1', capture_points: capturePoints },
    ...encoded,
    at: new Date().toISOString(),
  };
  return { streamId: locationScansStream(orgId, locationId), expectedRevision: 'any', events: [{ type: ScansRecorded.type, data }] };
}

/** A row of GET /reports/asset-locations, as the contract gives it. */
export interface ReportRow {
  asset_id: number;
  asset_external_key: string;
  location_id: number | null;
  location_external_key: string | null;
  asset_deleted_at: string | null;
  asset_last_seen: string;
  dwell_started_at: string;
}

/** A list envelope of the contract. */
export interface ListPage<T> {
  data: T[];
  limit: number;
  offset: number;
  total_count: number;
}

/** A placed read and the location whose reader placed it. */
export interface LocatedRead extends PlacedRead {
  locationId: number;
}

/**
 * Appends reads to the log in this order, in batches of 1 to `maxBatch` reads (each size drawn
 * from `rnd`), each batch one append of an event per location (placedReadsAppend); then waits
 * until the tracking projection has applied them.
 */
export async function deliverPlacedReads(svc: TestService, orgId: number, reads: readonly LocatedRead[], rnd: () => number, maxBatch: number): Promise<void> {
  const { store, checkpoints } = svc.service.ctx;
  let last: Awaited<ReturnType<typeof store.appendToStreams>> | null = null;
  for (let i = 0; i < reads.length; ) {
    const size = 1 + Math.floor(rnd() * maxBatch);
    const byLocation = new Map<number, LocatedRead[]>();
    for (const read of reads.slice(i, i + size)) byLocation.set(read.locationId, [...(byLocation.get(read.locationId) ?? []), read]);
    i += size;
    last = await store.appendToStreams([...byLocation].map(([locationId, list]) => placedReadsAppend(orgId, locationId, list)));
  }
  if (last) await checkpoints.waitForCheckpoint(last.position, { projections: ['tracking'] });
}
