import { comparePositions, START, type EventStore, type Position, type RecordedEvent } from '../../shared/event-store/port.js';

/**
 * The log up to `head` (the last append's position), whole. The store shows an event once every
 * transaction that could come before it has ended (docs/design.md "Event store (Postgres
 * adapter)"), and other databases' transactions on the same server count: right after the last
 * append, the tail may not be readable yet, so an empty batch before `head` is waited for, never
 * taken for the end.
 */
export async function readLogUpTo(store: EventStore, head: Position): Promise<RecordedEvent[]> {
  const events: RecordedEvent[] = [];
  const deadline = Date.now() + 30_000;
  for (let after: Position = START; comparePositions(after, head) < 0; ) {
    const batch = await store.readAll({ after, maxCount: 1000 });
    if (batch.length === 0) {
      if (Date.now() > deadline) throw new Error(`the log up to ${JSON.stringify(head)} not readable after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    events.push(...batch);
    after = batch.at(-1)!.position;
  }
  return events;
}
