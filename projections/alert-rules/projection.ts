import type pg from 'pg';
import { prepared } from '../../shared/db/prepared.js';
import { eventsOf } from '../../shared/event-store/catalogue.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { alertRuleEvents } from '../../shared/domain/alerts/events.js';

/**
 * Alert rules (migrations/read-model/500_alert_rules.sql; docs/api.md "Alerts"), kept from the
 * rule events. A deleted rule keeps its row with `deleted_at`: no list shows it, but the alerts it
 * raised still name it.
 */
export const alertRulesProjection: Projection = {
  name: 'alert-rules',
  eventTypes: alertRuleEvents.map((d) => d.type),
  tables: ['alert_rules'],
  async apply(events: RecordedEvent[], tx: pg.PoolClient): Promise<void> {
    for (const event of eventsOf(events, alertRuleEvents)) {
      switch (event.type) {
        case 'AlertRuleCreated': {
          const d = event.data;
          await tx.query(
            prepared(
              `INSERT INTO alert_rules (org_id, rule_id, name, kind, location_id, threshold_seconds, asset_ids, is_active, created_at, updated_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) ON CONFLICT (org_id, rule_id) DO NOTHING`,
              [d.org_id, d.rule_id, d.name, d.kind, d.location_id, d.threshold_seconds, d.asset_ids, d.is_active, d.at],
            ),
          );
          break;
        }
        case 'AlertRuleUpdated': {
          const { org_id, rule_id, changes: c, at } = event.data;
          await tx.query(
            prepared(
              `UPDATE alert_rules
                  SET name = COALESCE($3, name), kind = COALESCE($4, kind), location_id = COALESCE($5, location_id),
                      threshold_seconds = CASE WHEN $6::boolean THEN $7 ELSE threshold_seconds END,
                      asset_ids = CASE WHEN $8::boolean THEN $9::int[] ELSE asset_ids END,
                      is_active = COALESCE($10, is_active), updated_at = $11
                WHERE org_id = $1 AND rule_id = $2`,
              [
                org_id,
                rule_id,
                c.name ?? null,
                c.kind ?? null,
                c.location_id ?? null,
                c.threshold_seconds !== undefined,
                c.threshold_seconds ?? null,
                c.asset_ids !== undefined,
                c.asset_ids ?? null,
                c.is_active ?? null,
                at,
              ],
            ),
          );
          break;
        }
        case 'AlertRuleDeleted': {
          const d = event.data;
          await tx.query(prepared('UPDATE alert_rules SET deleted_at = $3 WHERE org_id = $1 AND rule_id = $2', [d.org_id, d.rule_id, d.at]));
          break;
        }
      }
    }
  },
};
