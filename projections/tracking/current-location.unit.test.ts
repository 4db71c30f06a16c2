import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compareReads,
  effectOf,
  followReads,
  isAfter,
  revisitLateReads,
  visitsOf,
  type Effect,
  type PlacedRead,
  type ReadPoint,
  type Visit,
} from './current-location.js';

/**
 * The current-location and visit rule on its own (docs/api.md "Tracking: where assets are and
 * have been"): examples of each effect, then properties over generated reads of one asset. The
 * reads are given in log order (`seq` is their place in it), observed at random instants (ties
 * included), and placed in random batches as the tracking projection places them, or followed
 * one by one as the webhooks subscriber follows them. Reproduce a failure with the seed it prints
 * (PROPERTY_SEED).
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261126);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 300);

const read = (us: number, seq: number, locationId: number): PlacedRead => ({ us, seq, locationId });
const visit = (locationId: number, first: ReadPoint, last: ReadPoint): Visit => ({ locationId, firstUs: first.us, firstSeq: first.seq, lastUs: last.us, lastSeq: last.seq });

describe('one read', () => {
  it('is the first, extends the current visit, moves the asset, or is late; a tie of observed time goes by log order', () => {
    const current = visit(1, { us: 10, seq: 1 }, { us: 20, seq: 5 });
    expect(effectOf(null, read(5, 9, 2))).toBe('first');
    expect(effectOf(current, read(21, 2, 1))).toBe('extends');
    expect(effectOf(current, read(21, 2, 2))).toBe('moves');
    expect(effectOf(current, read(20, 6, 2))).toBe('moves');
    expect(effectOf(current, read(20, 4, 2))).toBe('late');
    expect(effectOf(current, read(20, 5, 2))).toBe('late');
    expect(effectOf(current, read(15, 9, 2))).toBe('late');
    expect(isAfter({ us: 20, seq: 6 }, current)).toBe(true);
    expect(isAfter({ us: 19, seq: 99 }, current)).toBe(false);
    expect(compareReads({ us: 1, seq: 9 }, { us: 2, seq: 1 })).toBeLessThan(0);
    expect(compareReads({ us: 2, seq: 3 }, { us: 2, seq: 1 })).toBeGreaterThan(0);
  });
});

describe('followReads', () => {
  it('returns the visits it changed: the current one extended, then those it opened; a closed visit keeps its last read', () => {
    const current = visit(1, { us: 10, seq: 1 }, { us: 20, seq: 2 });
    const extendedThenMoved = followReads(current, [read(30, 3, 1), read(40, 4, 2), read(50, 5, 2)]);
    expect(extendedThenMoved.changed).toEqual([visit(1, { us: 10, seq: 1 }, { us: 30, seq: 3 }), visit(2, { us: 40, seq: 4 }, { us: 50, seq: 5 })]);
    expect(extendedThenMoved.current).toBe(extendedThenMoved.changed.at(-1));
    expect(current).toEqual(visit(1, { us: 10, seq: 1 }, { us: 20, seq: 2 }));

    const moved = followReads(current, [read(30, 3, 2)]);
    expect(moved.changed).toEqual([visit(2, { us: 30, seq: 3 }, { us: 30, seq: 3 })]);

    const late = followReads(current, [read(5, 3, 2)]);
    expect(late).toEqual({ current, changed: [] });
    expect(late.current).not.toBe(current);
    expect(followReads(null, [])).toEqual({ current: null, changed: [] });
  });

  it('tells each step, with the current visit just before it', () => {
    const steps: Array<[number, Effect, number | null]> = [];
    followReads(null, [read(10, 1, 1), read(5, 2, 2), read(10, 3, 2), read(12, 4, 2)], (s) => steps.push([s.index, s.effect, s.before?.locationId ?? null]));
    expect(steps).toEqual([
      [0, 'first', null],
      [1, 'late', 1],
      [2, 'moves', 1],
      [3, 'extends', 2],
    ]);
  });
});

describe('revisitLateReads', () => {
  // Visits of an asset: A [10..20] at 1, B [30..40] at 2, current. Reads at 10, 20, 30, 40 (seq 1..4).
  const A = visit(1, { us: 10, seq: 1 }, { us: 20, seq: 2 });
  const B = visit(2, { us: 30, seq: 3 }, { us: 40, seq: 4 });

  it('a late read inside a visit at another location splits it in three; the far ends stay', () => {
    const window = [read(10, 1, 1), read(15, 5, 3), read(20, 2, 1)];
    expect(revisitLateReads({ window, before: A, after: A, cut: null, current: B })).toEqual({
      from: { us: 10, seq: 1 },
      to: { us: 10, seq: 1 },
      visits: [visit(1, { us: 10, seq: 1 }, { us: 10, seq: 1 }), visit(3, { us: 15, seq: 5 }, { us: 15, seq: 5 }), visit(1, { us: 20, seq: 2 }, { us: 20, seq: 2 })],
      current: null,
    });
  });

  it("a late read between two visits at the second's location joins it; the current visit then begins earlier", () => {
    const window = [read(20, 2, 1), read(25, 5, 2), read(30, 3, 2)];
    expect(revisitLateReads({ window, before: A, after: B, cut: null, current: B })).toEqual({
      from: { us: 10, seq: 1 },
      to: { us: 30, seq: 3 },
      visits: [A, visit(2, { us: 25, seq: 5 }, { us: 40, seq: 4 })],
      current: visit(2, { us: 25, seq: 5 }, { us: 40, seq: 4 }),
    });
  });

  it('a late read before every read kept: joins a visit that began before them at its place, cuts it down to its first read elsewhere', () => {
    // C began at 1 (its reads before 10 dropped by retention); the reads kept begin at 10.
    const C = visit(1, { us: 1, seq: 1 }, { us: 20, seq: 2 });
    const joined = revisitLateReads({ window: [read(5, 5, 1), read(10, 1, 1), read(20, 2, 1)], before: null, after: C, cut: C, current: C });
    expect(joined).toEqual({ from: { us: 1, seq: 1 }, to: { us: 1, seq: 1 }, visits: [C], current: C });
    const cut = revisitLateReads({ window: [read(5, 5, 2), read(10, 1, 1), read(20, 2, 1)], before: null, after: C, cut: C, current: C });
    expect(cut.visits).toEqual([visit(1, { us: 1, seq: 1 }, { us: 1, seq: 1 }), visit(2, { us: 5, seq: 5 }, { us: 5, seq: 5 }), visit(1, { us: 10, seq: 1 }, { us: 20, seq: 2 })]);
    expect(cut.from).toEqual({ us: 1, seq: 1 });
  });
});

/**
 * An asset's history as the tracking projection keeps it, in memory: every read (its chunks), the
 * visits, the current visit. A batch is placed as the projection places it: all after the current
 * visit, followed; else the visits around the late reads revisited.
 */
class History {
  reads: PlacedRead[] = [];
  visits: Visit[] = [];
  current: Visit | null = null;

  place(batch: readonly PlacedRead[]): void {
    const sorted = [...batch].sort(compareReads);
    const merged = [...this.reads, ...sorted].sort(compareReads);
    if (!this.current || isAfter(sorted[0]!, this.current)) {
      const { current, changed } = followReads(this.current, sorted);
      for (const v of changed) this.write(v);
      this.current = current;
    } else {
      const first = sorted[0]!;
      const last = sorted.at(-1)!;
      const prev = this.reads.filter((r) => compareReads(r, first) < 0).at(-1) ?? null;
      const next = this.reads.find((r) => compareReads(r, last) > 0) ?? null;
      const revisited = revisitLateReads({
        window: merged.filter((r) => (!prev || compareReads(r, prev) >= 0) && (!next || compareReads(r, next) <= 0)),
        before: prev && this.holding(prev),
        after: next && this.holding(next),
        cut: null,
        current: this.current,
      });
      const { from, to } = revisited;
      this.visits = this.visits.filter((v) => {
        const start = { us: v.firstUs, seq: v.firstSeq };
        return compareReads(start, from) < 0 || (to !== null && compareReads(start, to) > 0);
      });
      for (const v of revisited.visits) this.write(v);
      if (revisited.current) this.current = revisited.current;
    }
    this.reads = merged;
  }

  /** The last visit that begins at or before the read and lasts until its instant (the projection's lookup). */
  private holding(read: PlacedRead): Visit | null {
    return this.visits.filter((v) => compareReads({ us: v.firstUs, seq: v.firstSeq }, read) <= 0 && v.lastUs >= read.us).at(-1) ?? null;
  }

  /** An upsert by first read, the visits kept in order. */
  private write(v: Visit): void {
    this.visits = [...this.visits.filter((w) => w.firstUs !== v.firstUs || w.firstSeq !== v.firstSeq), { ...v }].sort((a, b) => compareReads({ us: a.firstUs, seq: a.firstSeq }, { us: b.firstUs, seq: b.firstSeq }));
  }
}

/** Reads of one asset in log order: observed times in a narrow range (ties, late reads), 1 to 3 locations. */
const readsArb = (maxUs: number) =>
  fc.array(fc.record({ us: fc.integer({ min: 0, max: maxUs }), locationId: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 40 });

/** Cuts a list into consecutive batches of the given sizes (the rest: one batch). */
function batches<T>(list: readonly T[], sizes: readonly number[]): T[][] {
  const out: T[][] = [];
  let at = 0;
  for (const size of sizes) {
    if (at >= list.length) break;
    out.push(list.slice(at, at + size));
    at += size;
  }
  if (at < list.length) out.push(list.slice(at));
  return out;
}

const inLogOrder = (reads: ReadonlyArray<{ us: number; locationId: number }>): PlacedRead[] => reads.map((r, seq) => read(r.us, seq + 1, r.locationId));
const sizesArb = fc.array(fc.integer({ min: 1, max: 8 }), { maxLength: 40 });

describe('properties', () => {
  it('placed in any batching, reads give the visits of the sorted reads and the current visit is the last (ties by log order)', () => {
    fc.assert(
      fc.property(readsArb(30), sizesArb, (raw, sizes) => {
        const reads = inLogOrder(raw);
        const history = new History();
        for (const batch of batches(reads, sizes)) history.place(batch);
        const expected = visitsOf([...reads].sort(compareReads));
        expect(history.visits).toEqual(expected);
        expect(history.current).toEqual(expected.at(-1));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('the same reads at distinct instants, in any log order and batching, give the same visits', () => {
    const distinct = fc.uniqueArray(fc.record({ us: fc.integer({ min: 0, max: 1_000 }), locationId: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 40, selector: (r) => r.us });
    fc.assert(
      fc.property(
        distinct.chain((raw) => fc.tuple(fc.constant(raw), fc.shuffledSubarray(raw, { minLength: raw.length }), sizesArb, sizesArb)),
        ([raw, shuffled, sizesA, sizesB]) => {
          const placeAll = (order: typeof raw, sizes: number[]) => {
            const history = new History();
            for (const batch of batches(inLogOrder(order), sizes)) history.place(batch);
            return { visits: history.visits.map(({ locationId, firstUs, lastUs }) => [locationId, firstUs, lastUs]), current: history.current!.locationId };
          };
          expect(placeAll(shuffled, sizesB)).toEqual(placeAll(raw, sizesA));
        },
      ),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('followed in log order, in any batching, a read moves the asset exactly when the location of the latest read so far changes', () => {
    fc.assert(
      fc.property(readsArb(10), sizesArb, (raw, sizes) => {
        const reads = inLogOrder(raw);
        const moves: string[] = [];
        let current: Visit | null = null;
        let offset = 0;
        for (const batch of batches(reads, sizes)) {
          const base = offset;
          current = followReads(current, batch, (s) => {
            if (s.effect === 'first' || s.effect === 'moves') moves.push(`${s.before?.locationId ?? '-'}>${batch[s.index]!.locationId}@${base + s.index}`);
          }).current;
          offset += batch.length;
        }
        const expected: string[] = [];
        let latest: PlacedRead | null = null;
        reads.forEach((r, i) => {
          if (latest && compareReads(r, latest) < 0) return;
          if (!latest || latest.locationId !== r.locationId) expected.push(`${latest?.locationId ?? '-'}>${r.locationId}@${i}`);
          latest = r;
        });
        expect(moves).toEqual(expected);
        const last = [...reads].sort(compareReads).at(-1)!;
        expect(current).toMatchObject({ locationId: last.locationId, lastUs: last.us, lastSeq: last.seq });
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
