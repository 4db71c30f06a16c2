import type { ScansRecordedData } from '../shared/domain/scans/events.js';
import { decodeReads, type DecodedRead } from '../shared/domain/scans/read-codec.js';
import { segmentOfKey } from '../shared/projection/segments.js';

/**
 * The reads of a scan event for one segment of the projections split by asset (tracking, alerts,
 * counts: docs/design.md "Segmented processors"), decoded once in a process for all of them.
 * Decoding a read (its key is a SHA-256) is the largest part of what a read costs these
 * projections in node; each of the three decoding every read of every event cost three times that
 * (a V8 profile of a rebuild: decoding 36 % of the busy time, two thirds of it repeated).
 *
 * A segment decodes only the reads of its own assets' tags (a tag's asset is in the event's tag
 * dictionary) and of the tags that placed nothing, and skips the others unparsed: segments in
 * processes of their own (catch-up-processes.ts) each decode their share.
 */
/** A read that placed an asset. */
export type AssignedRead = DecodedRead & { assetId: number };

export interface SegmentReads {
  /** The reads of the segment's assets, in the event's order. */
  readonly assigned: readonly AssignedRead[];
  /** The reads that placed nothing (no asset), every one of them: whose they are is the caller's rule. */
  readonly unassigned: readonly DecodedRead[];
}

/** A segment as the projections receive it; absent: the projection runs whole. */
export interface AssetSegment {
  index: number;
  count: number;
}

/**
 * The decoded reads kept, at most: about one catch-up batch of dense reader events (5,000 events
 * of 50 reads), so the three projections applying one batch side by side, or live followers a
 * batch apart, find them decoded; the oldest events' reads go first.
 */
const KEPT_READS = 250_000;

const decoded = new Map<ScansRecordedData, Map<string, SegmentReads>>();
let keptReads = 0;

/** The segment a read of `assetId` belongs to (the key every projection split by asset uses). */
export function assetSegmentOf(orgId: number, assetId: number, count: number): number {
  return segmentOfKey(`${orgId}/${assetId}`, count);
}

/** Whether the asset belongs to `segment`: what a projection split by asset applies of it. */
export function inAssetSegment(segment: AssetSegment, orgId: number, assetId: number): boolean {
  return assetSegmentOf(orgId, assetId, segment.count) === segment.index;
}

/** The event's reads of `segment` (see the module comment). Shared: never changed by a caller. */
export function segmentReads(data: ScansRecordedData, segment?: AssetSegment): SegmentReads {
  const index = segment?.index ?? 0;
  const count = segment?.count ?? 1;
  const key = `${index}/${count}`;
  let bySegment = decoded.get(data);
  const found = bySegment?.get(key);
  if (found) return found;
  const tagSegments = count === 1 ? null : data.tags.map((tag) => (tag[2] === null ? -1 : assetSegmentOf(data.org_id, tag[2], count)));
  const reads = decodeReads(data, tagSegments ? (t) => tagSegments[t] === index || tagSegments[t] === -1 : undefined);
  const made: SegmentReads = { assigned: reads.filter((read): read is AssignedRead => read.assetId !== null), unassigned: reads.filter((read) => read.assetId === null) };
  if (!bySegment) decoded.set(data, (bySegment = new Map()));
  bySegment.set(key, made);
  keptReads += reads.length;
  for (const [oldest, segments] of decoded) {
    if (keptReads <= KEPT_READS || oldest === data) break;
    for (const reads of segments.values()) keptReads -= reads.assigned.length + reads.unassigned.length;
    decoded.delete(oldest);
  }
  return made;
}
