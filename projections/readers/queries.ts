import type pg from 'pg';
import { prepared } from '../../shared/db/prepared.js';

/** Read side of readers and scan points: the CLI's lists and ingest's resolution. */

export interface ReaderRow {
  reader_id: string;
  org_id: number;
  registered_at: string;
}

export interface ScanPointRow {
  reader_id: string;
  capture_point: string;
  location_id: number;
  location_external_key: string;
}

export async function listReaders(pool: pg.Pool, orgId: number): Promise<ReaderRow[]> {
  const result = await pool.query<ReaderRow>(
    prepared('SELECT reader_id, org_id, registered_at_rfc3339 AS registered_at FROM readers WHERE org_id = $1 ORDER BY reader_id', [orgId]),
  );
  return result.rows;
}

export async function listScanPoints(pool: pg.Pool, orgId: number, readerId?: string): Promise<ScanPointRow[]> {
  const result = await pool.query<ScanPointRow>(
    prepared(
      `SELECT p.reader_id, p.capture_point, p.location_id, l.external_key AS location_external_key
         FROM scan_points p JOIN locations l ON l.id = p.location_id AND l.org_id = p.org_id
        WHERE p.org_id = $1 AND ($2::text IS NULL OR p.reader_id = $2)
        ORDER BY p.reader_id, p.capture_point`,
      [orgId, readerId ?? null],
    ),
  );
  return result.rows;
}

/** The org of each registered reader among `readerIds`. */
export async function readerOrgs(db: pg.Pool, readerIds: readonly string[]): Promise<Map<string, number>> {
  const result = await db.query<{ reader_id: string; org_id: number }>(prepared('SELECT reader_id, org_id FROM readers WHERE reader_id = ANY($1::text[])', [readerIds]));
  return new Map(result.rows.map((r) => [r.reader_id, r.org_id]));
}

/** The location of each assigned (reader, capture point) among the readers' points. */
export async function scanPointLocations(db: pg.Pool, readerIds: readonly string[]): Promise<Map<string, number>> {
  const result = await db.query<{ reader_id: string; capture_point: string; location_id: number }>(
    prepared('SELECT reader_id, capture_point, location_id FROM scan_points WHERE reader_id = ANY($1::text[])', [readerIds]),
  );
  return new Map(result.rows.map((r) => [`${r.reader_id}\u0000${r.capture_point}`, r.location_id]));
}

export interface DeadLetterRow {
  id: string;
  topic: string;
  reason: string;
  received_at: string;
  payload_preview: string;
}

/** Dead-lettered reader messages, newest first: of one org's readers, or (null) all of them. */
export async function listDeadLetters(pool: pg.Pool, orgId: number | null): Promise<DeadLetterRow[]> {
  const result = await pool.query<DeadLetterRow>(
    prepared(
      `SELECT id::text AS id, topic, reason, received_at_rfc3339 AS received_at, payload_preview
         FROM scan_dead_letters
        WHERE $1::integer IS NULL OR org_id = $1
        ORDER BY received_at DESC, id`,
      [orgId],
    ),
  );
  return result.rows;
}
