import { comparePositions, type EventStore, type Position } from '../../shared/event-store/port.js';

/**
 * Waits until the log hands out everything up to `position`. The Postgres store reads an event
 * only once every transaction that might commit before it has ended, in any database of the
 * cluster: while another test file holds one open, an append this test made can stay unread for
 * a moment. A catch-up that must see it, and a head that must include it, wait here first.
 */
export async function untilVisible(store: Pick<EventStore, 'headPosition'>, position: Position, timeoutMs = 60_000): Promise<Position> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const head = await store.headPosition();
    if (comparePositions(head, position) >= 0) return head;
    if (Date.now() > deadline) throw new Error(`the log did not hand out ${JSON.stringify(position)} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
