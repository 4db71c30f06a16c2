import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ScansRecordedData } from '../shared/domain/scans/events.js';
import { decodeReads, encodeReads, type RawRead } from '../shared/domain/scans/read-codec.js';
import { assetSegmentOf, segmentReads } from './segment-reads.js';

/**
 * A scan event's reads by segment (projections/segment-reads.ts): for random events and 1 to 8
 * segments, the segments' assigned reads are the event's reads that placed an asset, each in its
 * asset's segment exactly once and in the event's order, and every segment gets every read that
 * placed nothing; the same segment of the same event is decoded once.
 */

const eventArb = fc
  .record({
    orgId: fc.integer({ min: 1, max: 50 }),
    reads: fc.array(
      fc.record({ tag: fc.integer({ min: 0, max: 30 }), observed: fc.integer({ min: 0, max: 10_000_000 }), point: fc.constantFrom('a', 'b', null), rssi: fc.option(fc.integer({ min: -90, max: -20 })) }),
      { minLength: 1, maxLength: 60 },
    ),
    // Tags whose number is a multiple of this placed nothing.
    unknownEvery: fc.integer({ min: 2, max: 10 }),
  })
  .map(({ orgId, reads, unknownEvery }): ScansRecordedData => {
    const raw: RawRead[] = reads.map((r) => ({ tag_type: 'rfid', value: `E2${String(r.tag).padStart(6, '0')}`, observedUs: 1_780_000_000_000_000 + r.observed, rssi: r.rssi, capturePoint: r.point }));
    const { capturePoints, ...encoded } = encodeReads(raw, (read) => {
      const tag = Number(read.value.slice(2));
      return tag % unknownEvery === 0 ? { assetId: null, cause: 'unknown_tag' } : { assetId: 1000 + tag, cause: null };
    });
    return { org_id: orgId, location_id: 7, source: { kind: 'reader', reader_id: 'r1', capture_points: capturePoints }, ...encoded, at: '2026-06-01T00:00:00.000Z' };
  });

describe('segmentReads', () => {
  it('deals each read that placed an asset to its asset\'s segment once, in order, and every read that placed nothing to every segment', () => {
    fc.assert(
      fc.property(eventArb, fc.integer({ min: 1, max: 8 }), (data, count) => {
        const all = decodeReads(data);
        const assigned = all.filter((read) => read.assetId !== null);
        const unassigned = all.filter((read) => read.assetId === null);
        const dealt = [];
        for (let index = 0; index < count; index++) {
          const reads = segmentReads(data, { index, count });
          for (const read of reads.assigned) expect(assetSegmentOf(data.org_id, read.assetId, count)).toBe(index);
          expect(reads.assigned).toEqual(assigned.filter((read) => assetSegmentOf(data.org_id, read.assetId!, count) === index));
          expect(reads.unassigned).toEqual(unassigned);
          dealt.push(...reads.assigned);
        }
        expect(dealt.length).toBe(assigned.length);
        expect(new Set(dealt.map((read) => read.readKey))).toEqual(new Set(assigned.map((read) => read.readKey)));
        // Whole (no segment): every read.
        expect([...segmentReads(data).assigned, ...segmentReads(data).unassigned].length).toBe(all.length);
      }),
      { numRuns: 300 },
    );
  });

  it('decodes a segment of an event once for every projection that asks', () => {
    fc.assert(
      fc.property(eventArb, fc.integer({ min: 1, max: 4 }), (data, count) => {
        for (let index = 0; index < count; index++) expect(segmentReads(data, { index, count })).toBe(segmentReads(data, { index, count }));
      }),
    );
  });
});
