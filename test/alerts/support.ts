import type pg from 'pg';

/**
 * FIXTURE, not the service: writes rows of the `alerts` table directly, as the `alerts`
 * subscriber would. Until that subscriber is merged the table has no writer, so the API's tests
 * of the alert list, its filters, 404s and acknowledge insert what they read here. Replace these
 * rows with alerts raised by real reads once the subscriber lands.
 */
export interface AlertFixture {
  orgId: number;
  ruleId: number;
  kind: 'entered' | 'left' | 'dwell_exceeded' | 'not_seen';
  assetId: number;
  locationId: number;
  raisedAt: string;
  /** The n of `<rule>-<asset>-<n>` (default 1). */
  n?: number;
  status?: 'open' | 'acknowledged' | 'resolved';
  resolvedAt?: string | null;
  position?: number;
}

let positions = 0;

export async function insertAlertFixture(pool: pg.Pool, alert: AlertFixture): Promise<string> {
  const id = `${alert.ruleId}-${alert.assetId}-${alert.n ?? 1}`;
  await pool.query(
    `INSERT INTO alerts (org_id, alert_id, rule_id, kind, asset_id, location_id, raised_at, status, resolved_at, raised_position)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [alert.orgId, id, alert.ruleId, alert.kind, alert.assetId, alert.locationId, alert.raisedAt, alert.status ?? 'open', alert.resolvedAt ?? null, alert.position ?? ++positions],
  );
  return id;
}
