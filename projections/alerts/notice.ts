import type pg from 'pg';

/**
 * The notice that alerts changed (docs/web-app.md "Live alerts"): the `alerts` projection sends it
 * in the transaction of a batch that wrote alerts (a NOTIFY is delivered at commit, and only if
 * the batch commits), and the api processes forward it to the console's open inboxes, which then
 * read the list again. The payload names the schema the batch was written to (a rebuild's or a
 * replay's own schema is not the current read model, and is not forwarded) and the organizations
 * whose alerts changed.
 */

export const ALERTS_CHANGED_CHANNEL = 'alerts_changed';

/** A NOTIFY payload is at most 8000 bytes: past this many organizations, `*` (every one) is sent. */
const MAX_LISTED_ORGS = 500;

export interface AlertsChanged {
  schema: string;
  /** The organizations whose alerts changed; null: every organization. */
  orgIds: number[] | null;
}

export function alertsChangedPayload(orgIds: Iterable<number>): string {
  const distinct = [...new Set(orgIds)].sort((a, b) => a - b);
  return distinct.length > MAX_LISTED_ORGS ? '*' : distinct.join(',');
}

/** `<schema> <org,org,…|*>`, as the statement below sends it; null for a payload that is not one. */
export function parseAlertsChanged(payload: string): AlertsChanged | null {
  const match = /^(\S+) (\*|\d+(?:,\d+)*)$/.exec(payload);
  if (!match) return null;
  return { schema: match[1]!, orgIds: match[2] === '*' ? null : match[2]!.split(',').map(Number) };
}

/** Inside the batch's transaction: sent at its commit, with the schema the batch writes to. */
export async function notifyAlertsChanged(tx: pg.PoolClient, orgIds: Iterable<number>): Promise<void> {
  const orgs = alertsChangedPayload(orgIds);
  if (orgs === '') return;
  await tx.query(`SELECT pg_notify($1, current_schema() || ' ' || $2)`, [ALERTS_CHANGED_CHANNEL, orgs]);
}
