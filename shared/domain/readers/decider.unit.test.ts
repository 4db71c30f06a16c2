import { describe, expect, it } from 'vitest';
import { DomainRefusal } from '../refusal.js';
import { Conflict, NotFound } from '../../../test/support/refusals.js';
import { fold as foldEvents } from '../decider.js';
import { decide, evolve, readerDecider, type ReaderCommand, type ReaderState } from './decider.js';
import type { ReaderEvent } from './events.js';
import { seededRandom as seeded } from '../../random.js';

/** The reader decider: given(events).when(command).then(events | error), with no I/O. */

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';

const fold = (events: readonly ReaderEvent[]): ReaderState => foldEvents(readerDecider, events);
const decideAfter = (events: readonly ReaderEvent[], command: ReaderCommand) => decide(command, fold(events));

function refusal(events: readonly ReaderEvent[], command: ReaderCommand): unknown {
  try {
    decideAfter(events, command);
  } catch (error) {
    return error;
  }
  throw new Error('the command was accepted');
}

const registered: ReaderEvent = { type: 'ReaderRegistered', data: { org_id: 3, reader_id: 'gw-1', at: T0 } };
const assigned = (capturePoint: string, locationId: number, at = T1): ReaderEvent => ({
  type: 'ScanPointAssigned',
  data: { org_id: 3, reader_id: 'gw-1', capture_point: capturePoint, location_id: locationId, at },
});
const unassigned = (capturePoint: string, at = T1): ReaderEvent => ({
  type: 'ScanPointUnassigned',
  data: { org_id: 3, reader_id: 'gw-1', capture_point: capturePoint, at },
});

describe('reader evolve', () => {
  it('an unknown reader belongs to no org and has no points', () => {
    expect(fold([])).toStrictEqual({ orgId: null, registeredAt: null, points: new Map() });
  });

  it('registration, then assignments and unassignments, fold into the org and each point’s location', () => {
    expect(fold([registered])).toStrictEqual({ orgId: 3, registeredAt: T0, points: new Map() });
    expect(fold([registered, assigned('ant-1', 10), assigned('ant-2', 11), assigned('ant-1', 12), unassigned('ant-2')])).toStrictEqual({
      orgId: 3,
      registeredAt: T0,
      points: new Map([['ant-1', 12]]),
    });
  });

  it('never changes the state it is given (each state is a value)', () => {
    const before = fold([registered, assigned('ant-1', 10)]);
    const snapshot = new Map(before.points);
    evolve(before, assigned('ant-2', 11));
    evolve(before, unassigned('ant-1'));
    expect(before.points).toStrictEqual(snapshot);
  });
});

describe('RegisterReader', () => {
  it('a new reader → ReaderRegistered in the org', () => {
    expect(decideAfter([], { type: 'RegisterReader', orgId: 3, readerId: 'gw-1', at: T0 })).toStrictEqual([registered]);
  });

  it('again in the same org → no events (idempotent)', () => {
    expect(decideAfter([registered], { type: 'RegisterReader', orgId: 3, readerId: 'gw-1', at: T1 })).toStrictEqual([]);
  });

  it('in another org → 409 naming the org that holds it', () => {
    const error = refusal([registered], { type: 'RegisterReader', orgId: 4, readerId: 'gw-1', at: T1 });
    expect(error).toBeInstanceOf(Conflict);
    expect((error as DomainRefusal).message).toBe('reader gw-1 is already registered to organization 3');
  });
});

describe('AssignScanPoint and UnassignScanPoint', () => {
  const assign = (capturePoint: string, locationId: number, orgId = 3): ReaderCommand => ({
    type: 'AssignScanPoint',
    orgId,
    readerId: 'gw-1',
    capturePoint,
    locationId,
    at: T1,
  });
  const unassign = (capturePoint: string, orgId = 3): ReaderCommand => ({ type: 'UnassignScanPoint', orgId, readerId: 'gw-1', capturePoint, at: T1 });

  it('a reader not registered in the org → 404 naming the reader and the org', () => {
    for (const history of [[], [registered]]) {
      for (const command of [assign('ant-1', 10, 4), unassign('ant-1', 4)]) {
        const error = refusal(history, command);
        expect(error).toBeInstanceOf(NotFound);
        expect((error as DomainRefusal).message).toBe('reader gw-1 is not registered in organization 4');
      }
    }
  });

  it('assigns a point; moves an assigned one; the same location again → no events', () => {
    expect(decideAfter([registered], assign('ant-1', 10))).toStrictEqual([assigned('ant-1', 10)]);
    expect(decideAfter([registered, assigned('ant-1', 10)], assign('ant-1', 11))).toStrictEqual([assigned('ant-1', 11)]);
    expect(decideAfter([registered, assigned('ant-1', 10)], assign('ant-1', 10))).toStrictEqual([]);
  });

  it('unassigns an assigned point; one that is not assigned → 404 naming it', () => {
    expect(decideAfter([registered, assigned('ant-1', 10)], unassign('ant-1'))).toStrictEqual([unassigned('ant-1')]);
    const error = refusal([registered, assigned('ant-1', 10), unassigned('ant-1')], unassign('ant-1'));
    expect(error).toBeInstanceOf(NotFound);
    expect((error as DomainRefusal).message).toBe('capture point ant-1 of reader gw-1 is not assigned');
  });

  it('in random sequences of commands, each point ends where its last assignment put it, unless unassigned since', () => {
    const points = ['ant-1', 'ant-2', 'ant-3'];
    for (let seed = 1; seed <= 20; seed++) {
      const random = seeded(seed);
      let state = fold([registered]);
      const expected = new Map<string, number>();
      for (let step = 0; step < 20; step++) {
        const point = points[Math.floor(random() * points.length)]!;
        if (random() < 0.6) {
          const locationId = 10 + Math.floor(random() * 3);
          const produced = decide(assign(point, locationId), state);
          expect(produced).toStrictEqual(expected.get(point) === locationId ? [] : [assigned(point, locationId)]);
          state = produced.reduce(evolve, state);
          expected.set(point, locationId);
        } else if (expected.has(point)) {
          const produced = decide(unassign(point), state);
          expect(produced).toStrictEqual([unassigned(point)]);
          state = produced.reduce(evolve, state);
          expected.delete(point);
        } else {
          expect(() => decide(unassign(point), state)).toThrow(NotFound);
        }
        expect(state.points).toStrictEqual(expected);
      }
    }
  });
});
