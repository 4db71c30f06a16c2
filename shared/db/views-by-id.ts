import type pg from 'pg';
import { prepared } from './prepared.js';
import { JsonText } from '../json/text.js';

interface Waiting {
  orgId: number;
  id: number;
  resolve(view: JsonText | null): void;
  reject(error: unknown): void;
}

/**
 * Reads of one view by (org, id) that arrive in the same turn of the event loop go to Postgres as
 * one statement: under concurrent load a turn typically brings several requests at once, and one
 * statement for all of them spares Postgres a round of parse-bind-execute and each request a
 * socket write and read. A lone request waits for nothing: the batch leaves at the end of the turn
 * it arrived in. Each answer is matched to its request by position, and every row is looked up by
 * its own (org, id) pair, so an id of another org is a miss exactly as on its own.
 */
export class ViewsById {
  private waiting: Waiting[] = [];
  /** Statement text per batch size: pairs are listed in VALUES, so every text has one row count and keeps one plan. */
  private readonly texts = new Map<number, string>();

  /**
   * `viewSql(pair)`: a statement selecting the view's columns of the existing row identified by
   * `${pair}.org_id` and `${pair}.id` (at most one row).
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly viewSql: (pair: string) => string,
  ) {}

  read(orgId: number, id: number): Promise<JsonText | null> {
    return new Promise((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => this.flush());
      this.waiting.push({ orgId, id, resolve, reject });
    });
  }

  private flush(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (let start = 0; start < waiting.length; start += MAX_BATCH) void this.readBatch(waiting.slice(start, start + MAX_BATCH));
  }

  private async readBatch(batch: Waiting[]): Promise<void> {
    try {
      const result = await this.pool.query<{ org_id: number; id: number; json: string }>(
        prepared(
          this.textFor(batch.length),
          batch.flatMap((w) => [w.orgId, w.id]),
        ),
      );
      const found = new Map(result.rows.map((row) => [`${row.org_id}/${row.id}`, row.json]));
      for (const w of batch) {
        const json = found.get(`${w.orgId}/${w.id}`);
        w.resolve(json === undefined ? null : new JsonText(json));
      }
    } catch (error) {
      for (const w of batch) w.reject(error);
    }
  }

  private textFor(size: number): string {
    let text = this.texts.get(size);
    if (text === undefined) {
      const pairs = Array.from({ length: size }, (_, i) => `($${2 * i + 1}::int, $${2 * i + 2}::int)`).join(', ');
      text = `SELECT r.org_id, r.id, row_to_json(v)::text AS json
                FROM (VALUES ${pairs}) AS r(org_id, id)
                CROSS JOIN LATERAL (${this.viewSql('r')}) v`;
      this.texts.set(size, text);
    }
    return text;
  }
}

/** Reads of one turn beyond this many go as several statements. */
const MAX_BATCH = 32;

/** One ViewsById per pool and view. */
export function viewsById(cache: WeakMap<pg.Pool, ViewsById>, pool: pg.Pool, viewSql: (pair: string) => string): ViewsById {
  let views = cache.get(pool);
  if (!views) cache.set(pool, (views = new ViewsById(pool, viewSql)));
  return views;
}
