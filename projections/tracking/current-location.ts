/**
 * The current-location and visit rule, the one home of it (docs/api.md "Tracking: where assets are
 * and have been", docs/design.md "Tracking storage"). Pure: no SQL, no I/O. The tracking
 * projection places reads with it, and every subscriber that follows movement (the webhooks
 * role's, docs/design.md "Webhooks") calls it rather than keeping a copy.
 *
 * - An asset's reads are ordered by (observed time, log order): `compareReads`.
 * - A **visit** is a maximal run of its reads at one location in that order: `visitsOf`.
 * - Its **current location** is the location of its latest read in that order, and its current
 *   visit the visit holding that read.
 * - Followed one by one (`followReads`), a read is the asset's `first`, or it comes after the
 *   current visit's last read and `extends` that visit (same location) or `moves` the asset (it
 *   closes the current visit, which keeps its last read, and opens one at the read's location), or
 *   it is `late` and the current location stays. Reads followed in their log order give, read by
 *   read, the current location as it stood in the log; given sorted and all after the current
 *   visit (the usual batch), the visits they extend and open.
 * - A late read's place in history (`revisitLateReads`): the visits from the one holding the read
 *   just before it to the one holding the read just after it are recounted from the reads between
 *   those two, which keep their far ends.
 *
 * Log order is a number that grows along the log (the projection's `seq`); a caller that follows
 * the log without one can number its reads, since whatever it follows later in the log comes after.
 */

/** A place in the order of an asset's reads: observed time (µs since the epoch), log order. */
export interface ReadPoint {
  us: number;
  seq: number;
}

/** One read of an asset, where it placed the asset. */
export interface PlacedRead extends ReadPoint {
  locationId: number;
}

/** A visit: a maximal run of an asset's reads at one location, by its first and its last read. */
export interface Visit {
  locationId: number;
  firstUs: number;
  firstSeq: number;
  lastUs: number;
  lastSeq: number;
}

/** (observed time, log order): the order of an asset's reads. Negative when `a` comes first. */
export const compareReads = (a: ReadPoint, b: ReadPoint): number => a.us - b.us || a.seq - b.seq;

/** Whether `read` comes after the last read of `visit`. */
export const isAfter = (read: ReadPoint, visit: Visit): boolean => read.us > visit.lastUs || (read.us === visit.lastUs && read.seq > visit.lastSeq);

/** What a read does to the asset's current visit (see the module comment). */
export type Effect = 'first' | 'extends' | 'moves' | 'late';

export function effectOf(current: Visit | null, read: PlacedRead): Effect {
  if (!current) return 'first';
  if (!isAfter(read, current)) return 'late';
  return read.locationId === current.locationId ? 'extends' : 'moves';
}

/** One read followed: its index among the reads given, its effect, and the current visit just before it (a copy; null before the first read). */
export interface Step {
  index: number;
  effect: Effect;
  before: Visit | null;
}

export interface Followed {
  /** The current visit after the reads (a new object; null only with no visit and no read). */
  current: Visit | null;
  /**
   * The visits the reads changed, in order: the current visit given, when a read extended it,
   * then each visit a read opened; the last is `current`. Empty when every read was late.
   */
  changed: Visit[];
}

/**
 * Follows an asset's reads, in the order given, from its current visit (not changed). `onStep`,
 * when given, hears what each read does, late ones included, before the next is followed.
 */
export function followReads(current: Visit | null, reads: readonly PlacedRead[], onStep?: (step: Step) => void): Followed {
  let visit: Visit | null = current ? { ...current } : null;
  let changed = false;
  const visits: Visit[] = [];
  for (let index = 0; index < reads.length; index++) {
    const read = reads[index]!;
    const effect = effectOf(visit, read);
    if (onStep) onStep({ index, effect, before: visit ? { ...visit } : null });
    if (effect === 'late') continue;
    if (effect === 'extends') {
      visit!.lastUs = read.us;
      visit!.lastSeq = read.seq;
    } else {
      if (visit && changed) visits.push(visit);
      visit = { locationId: read.locationId, firstUs: read.us, firstSeq: read.seq, lastUs: read.us, lastSeq: read.seq };
    }
    changed = true;
  }
  if (visit && changed) visits.push(visit);
  return { current: visit, changed: visits };
}

/** The visits of sorted reads (`compareReads`): their maximal runs at one location. */
export function visitsOf(sorted: readonly PlacedRead[]): Visit[] {
  const visits: Visit[] = [];
  for (const read of sorted) {
    const last = visits.at(-1);
    if (last && last.locationId === read.locationId) {
      last.lastUs = read.us;
      last.lastSeq = read.seq;
    } else {
      visits.push({ locationId: read.locationId, firstUs: read.us, firstSeq: read.seq, lastUs: read.us, lastSeq: read.seq });
    }
  }
  return visits;
}

/** Where late reads fall among an asset's reads and visits (see `revisitLateReads`). */
export interface LateReads {
  /**
   * Every read of the asset, sorted, from the read just before the late ones to the read just
   * after them, both included (without one before: from the first read kept; without one after:
   * to the last read).
   */
  window: readonly PlacedRead[];
  /** The visit holding the read just before the late ones, if any: it keeps its first read. */
  before: Visit | null;
  /** The visit holding the read just after the late ones, if any: it keeps its last read. */
  after: Visit | null;
  /**
   * With no read before the late ones: the visit holding the first of them, which began before
   * the reads kept (retention dropped its first reads), if any. A late read at its location joins
   * it; one elsewhere cuts it down to its first read (docs/design.md "Tracking storage").
   */
  cut: Visit | null;
  /** The asset's current visit. */
  current: Visit;
}

export interface Revisited {
  /**
   * The visits that begin from `from` up to `to` (by first read, both included; `to` null: with
   * no end) are replaced by `visits`.
   */
  from: ReadPoint;
  to: ReadPoint | null;
  /** In order (a visit cut short first), each new or changed. */
  visits: Visit[];
  /** The asset's current visit when the late reads changed it (the last of `visits`), else null. */
  current: Visit | null;
}

/** The visits around late reads, recounted from the reads between their neighbours. */
export function revisitLateReads({ window, before, after, cut, current }: LateReads): Revisited {
  const runs = visitsOf(window);
  const first = runs[0]!;
  const last = runs.at(-1)!;
  const start = before ?? (cut && cut.locationId === first.locationId ? cut : null);
  if (start) {
    first.firstUs = start.firstUs;
    first.firstSeq = start.firstSeq;
  }
  const visits: Visit[] = cut && !start ? [{ ...cut, lastUs: cut.firstUs, lastSeq: cut.firstSeq }] : [];
  if (after) {
    last.lastUs = after.lastUs;
    last.lastSeq = after.lastSeq;
  }
  visits.push(...runs);
  const from = before ?? cut;
  const isCurrent = !after || (after.firstUs === current.firstUs && after.firstSeq === current.firstSeq);
  return {
    from: from ? { us: from.firstUs, seq: from.firstSeq } : { us: window[0]!.us, seq: window[0]!.seq },
    to: after ? { us: after.firstUs, seq: after.firstSeq } : null,
    visits,
    current: isCurrent ? last : null,
  };
}

/**
 * An asset's position as a subscriber that follows the log keeps it (the webhooks role's, the
 * alerts subscriber): its current location, the observed time of its latest read, and the keys of
 * the reads at that instant, which tell a read delivered again (it can only tie with the latest
 * read, never pass it).
 */
export interface Position {
  locationId: number;
  lastSeenUs: number;
  keys: string[];
}

/** What one read did: the asset's first read, a read at a later instant than any before, a move. */
export interface Change {
  kind: 'first_seen' | 'moved' | 'advanced';
  /** The read's index among the asset's reads. */
  index: number;
  /** The current location before the read. */
  from: number | null;
}

/**
 * What one asset's reads (in log order) change, from its position before them: the changes and
 * its position after. The current location is the rule above (`followReads`), followed in log
 * order; what is kept here is only how a position stands for a visit, and the keys that tell a
 * read delivered again.
 */
export function followPosition(
  before: Position | null,
  reads: ReadonlyArray<{ locationId: number; observedUs: number; readKey: string }>,
): { after: Position | null; changes: Change[] } {
  // A read delivered again, at an instant whose keys are known, changes nothing: those known
  // before, and those of the reads followed so far at that instant.
  const keysAt = new Map<number, Set<string>>();
  if (before) keysAt.set(before.lastSeenUs, new Set(before.keys));
  const fresh: number[] = [];
  reads.forEach((read, index) => {
    const keys = keysAt.get(read.observedUs);
    if (keys?.has(read.readKey)) return;
    if (keys) keys.add(read.readKey);
    else keysAt.set(read.observedUs, new Set([read.readKey]));
    fresh.push(index);
  });
  // The position's read comes before every read followed now in the log: log order 0, then 1, 2, ...
  const current: Visit | null = before && { locationId: before.locationId, firstUs: before.lastSeenUs, firstSeq: 0, lastUs: before.lastSeenUs, lastSeq: 0 };
  const placed: PlacedRead[] = fresh.map((index, i) => ({ us: reads[index]!.observedUs, seq: i + 1, locationId: reads[index]!.locationId }));
  const changes: Change[] = [];
  const followed = followReads(current, placed, ({ index: i, effect, before: was }) => {
    const index = fresh[i]!;
    if (effect === 'first') changes.push({ kind: 'first_seen', index, from: null });
    if (effect === 'late' || !was) return;
    if (placed[i]!.us > was.lastUs) changes.push({ kind: 'advanced', index, from: was.locationId });
    if (effect === 'moves') changes.push({ kind: 'moved', index, from: was.locationId });
  });
  const now = followed.current;
  if (!now) return { after: null, changes };
  const keys = now.lastUs === before?.lastSeenUs ? [...before.keys] : [];
  for (const index of fresh) if (reads[index]!.observedUs === now.lastUs) keys.push(reads[index]!.readKey);
  return { after: { locationId: now.locationId, lastSeenUs: now.lastUs, keys }, changes };
}

