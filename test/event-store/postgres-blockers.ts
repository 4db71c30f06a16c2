import pg from 'pg';
import { expect } from 'vitest';
import { eventually, uniqueStream } from './conformance.js';

/** Ways to make an append of the store wait inside Postgres, and to find it waiting (database `url`, checked through `admin`). */
export function blockers(url: string, admin: pg.Client) {
  return {
    /** Opens a transaction that inserts an event with this id (uncommitted): an append of the same id waits on it. */
    async holdEventId(eventId: string): Promise<pg.Client> {
      const client = new pg.Client({ connectionString: url, application_name: 'es-test-blocker' });
      await client.connect();
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data) VALUES ($1, $2, 0, 'Blocker', '{}')`,
        [eventId, uniqueStream('blocker')],
      );
      return client;
    },

    /** The backend of `applicationName` that waits on a lock inside an append, once there is one. */
    async blockedAppendBackend(applicationName: string): Promise<{ pid: number; hasWritten: boolean }> {
      return eventually(async () => {
        const result = await admin.query<{ pid: number; has_xid: boolean }>(
          `SELECT pid, backend_xid IS NOT NULL AS has_xid FROM pg_stat_activity
           WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%append_events%'`,
          [applicationName],
        );
        expect(result.rows).toHaveLength(1);
        return { pid: result.rows[0]!.pid, hasWritten: result.rows[0]!.has_xid };
      });
    },
  };
}
