import { describe, expect, it } from 'vitest';
import { openKurrentDbEventStore } from '../../shared/event-store/kurrentdb.js';
import { comparePositions } from '../../shared/event-store/port.js';
import { eventStoreConformance, eventually, testEvent, uniqueStream } from './conformance.js';

/**
 * The conformance suite against a real KurrentDB (25.1 or later), when KURRENTDB_URL names one:
 *
 *   docker compose -f deploy/docker-compose.yml up kurrentdb
 *   KURRENTDB_URL='kurrentdb://localhost:2113?tls=false' npx vitest run test/event-store/kurrentdb.int.test.ts
 *
 * Every test uses streams of its own, so a server that holds other data will do. Without the
 * variable the suite is skipped, and says so.
 */
const url = process.env.KURRENTDB_URL;
const SKIPPED = 'KURRENTDB_URL is not set: the KurrentDB event-store conformance suite did not run (see this file for how to run it)';

if (!url) {
  console.warn(`test/event-store/kurrentdb.int.test.ts: ${SKIPPED}`);
  describe('EventStore conformance: kurrentdb', () => {
    it.skip(SKIPPED, () => undefined);
  });
} else {
  // Short probe intervals: the filter tests wait for positions to move past skipped events.
  eventStoreConformance('kurrentdb', async () => {
    const store = await openKurrentDbEventStore(url, { progressIntervalMs: 50, progressMaxIntervalMs: 200 });
    return { store, cleanup: () => store.close() };
  });

  describe('kurrentdb event store', () => {
    it('reports a server of 25.1 or later', async () => {
      const store = await openKurrentDbEventStore(url);
      try {
        expect(store.serverVersion.major * 100 + store.serverVersion.minor).toBeGreaterThanOrEqual(2501);
      } finally {
        await store.close();
      }
    });

    it('a filtered subscription in another store still moves past what it leaves out (no appends of its own to wake it)', async () => {
      const writer = await openKurrentDbEventStore(url);
      const reader = await openKurrentDbEventStore(url, { progressIntervalMs: 50, progressMaxIntervalMs: 400 });
      const controller = new AbortController();
      try {
        const head = await reader.headPosition();
        let position = head;
        const subscription = (async () => {
          for await (const batch of reader.subscribeToAll({ after: head, filter: { eventTypes: ['NeverWrittenByTheConformanceSuite'] }, signal: controller.signal })) {
            expect(batch.events).toEqual([]);
            position = batch.position;
          }
        })();
        const appended = await writer.appendToStream(uniqueStream('kurrent-progress'), [testEvent(1), testEvent(2)]);
        await eventually(() => expect(comparePositions(position, appended.position)).toBeGreaterThanOrEqual(0), 10_000);
        controller.abort();
        await subscription;
      } finally {
        controller.abort();
        await reader.close();
        await writer.close();
      }
    });
  });
}
