import { randomUUID } from 'node:crypto';
import type pg from 'pg';

/**
 * The asset states an engine's batch left (the alerts and counts engines: a row per asset,
 * loaded and written around each batch), kept in the process for the next batch of the same
 * segment, so that the states of the assets it read last time are not loaded again
 * (docs/design.md "Engine batches").
 *
 * They are known by a token, a random value each batch writes into its segment's row with its
 * states: the next batch reads the token with the segment's row, in its transaction, and takes
 * the states kept under it, which are then exactly the rows it would load. A batch rolled back
 * (or one of another process, a rebuild swapped in from one, a takeover) leaves another token in
 * the row, and nothing is found under it. The states are taken out while a batch runs (its steps change
 * them in place), so a batch that fails leaves none behind; kept as the JSON text the batch wrote,
 * so a state comes back as it would from its row. Bounded: past MAX_STATES in all (a few segments
 * of a large installation), the oldest tokens' states are dropped and loaded again.
 */
export class EngineStates {
  private readonly byToken = new Map<string, Map<string, string>>();
  private held = 0;

  constructor(private readonly maxStates = MAX_STATES) {}

  /** A fresh token, for the batch about to write its states. */
  static token(): string {
    return randomUUID();
  }

  /** The states left by the batch that wrote `token`, by asset key, as JSON text (empty when none are kept); taken out. */
  take(token: string | null): Map<string, string> {
    const states = token === null ? undefined : this.byToken.get(token);
    if (!states) return new Map();
    this.byToken.delete(token!);
    this.held -= states.size;
    return states;
  }

  /**
   * Of the `named` assets (key → [org, asset]), those whose state `texts` holds, parsed, and the
   * others, to be loaded.
   */
  static split<S>(named: Map<string, [number, number]>, texts: Map<string, string>): { held: Map<string, S>; unknown: Array<[number, number]> } {
    const held = new Map<string, S>();
    const unknown: Array<[number, number]> = [];
    for (const [key, pair] of named) {
      const text = texts.get(key);
      if (text === undefined) unknown.push(pair);
      else held.set(key, JSON.parse(text) as S);
    }
    return { held, unknown };
  }

  /** The states as the batch that wrote `token` left them, for the batch after it. */
  keep(token: string, states: Map<string, string>): void {
    if (states.size > this.maxStates) return;
    this.byToken.set(token, states);
    this.held += states.size;
    for (const [oldest, dropped] of this.byToken) {
      if (this.held <= this.maxStates) break;
      this.byToken.delete(oldest);
      this.held -= dropped.size;
    }
  }
}

/** The states a process keeps for each engine, in all its segments. */
export const MAX_STATES = 100_000;

/**
 * Writes a segment's row at the end of its batch: its shared state (without the tree, kept a row
 * per location) when the batch changed it or the row is new, and a new token every batch; the token.
 */
export async function writeSegmentRow(
  tx: pg.PoolClient,
  table: 'alerts_engine_segments' | 'counts_engine_segments',
  segment: number,
  shared: { tree: unknown },
  changed: boolean,
): Promise<string> {
  const { tree: _tree, ...state } = shared;
  const token = EngineStates.token();
  await tx.query(
    `INSERT INTO ${table} AS s (segment, state, batch_token) VALUES ($1, $2::jsonb, $3)
     ON CONFLICT (segment) DO UPDATE SET batch_token = EXCLUDED.batch_token, state = CASE WHEN $4 THEN EXCLUDED.state ELSE s.state END`,
    [segment, JSON.stringify(state), token, changed],
  );
  return token;
}
