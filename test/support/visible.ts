import type pg from 'pg';
import { START, comparePositions, type EventStore, type Position } from '../../shared/event-store/port.js';

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

/** The position of the last event committed before this call, whether readers see it yet or not. */
async function lastCommitted(pool: pg.Pool): Promise<Position> {
  const { rows } = await pool.query<{ commit: string; prepare: string }>(`SELECT tx_id::text AS commit, global_position::text AS prepare FROM event_store.events ORDER BY tx_id DESC, global_position DESC LIMIT 1`);
  const row = rows[0];
  return row ? { commit: BigInt(row.commit), prepare: BigInt(row.prepare) } : START;
}

/**
 * The head once it includes every event committed before the call: what a test waits for after
 * its appends. `headPosition()` alone may stop short of them while another test file holds a
 * transaction open (see `untilVisible`).
 */
export async function settledHead(store: Pick<EventStore, 'headPosition'>, pool: pg.Pool): Promise<Position> {
  return untilVisible(store, await lastCommitted(pool));
}
