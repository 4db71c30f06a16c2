import type pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { eventsOf } from '../../shared/event-store/catalogue.js';
import { API_KEY_CHANGED_CHANNEL } from '../../shared/auth/api-key-states.js';
import { authEvents } from '../../shared/domain/orgs-and-keys/events.js';
import { prepared } from '../../shared/db/prepared.js';

/** Organizations and API keys (`orgs`, `api_keys`). */
export const authProjection: Projection = {
  name: 'auth',
  tables: ['orgs', 'api_keys'],
  eventTypes: authEvents.map((e) => e.type),
  async apply(events: RecordedEvent[], tx: pg.PoolClient) {
    for (const event of eventsOf(events, authEvents)) {
      switch (event.type) {
        case 'OrgCreated': {
          const data = event.data;
          await tx.query(prepared('INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING', [
            data.org_id,
            data.name,
            data.created_at,
          ]));
          break;
        }
        case 'ApiKeyMinted': {
          const data = event.data;
          await tx.query(
            prepared(
              `INSERT INTO api_keys (id, org_id, name, prefix, scopes, signing_kid, created_at, expires_at, minted_by)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING`,
              [data.key_id, data.org_id, data.name, data.prefix, data.scopes, data.signing_kid, data.created_at, data.expires_at, data.minted_by ?? null],
            ),
          );
          break;
        }
        case 'ApiKeyRevoked': {
          const data = event.data;
          await tx.query(
            prepared('UPDATE api_keys SET revoked_at = $2, revoked_by = $3 WHERE id = $1 AND revoked_at IS NULL', [data.key_id, data.revoked_at, data.revoked_by ?? null]),
          );
          // Delivered at commit: api processes drop the key from their caches.
          await tx.query(prepared('SELECT pg_notify($1, $2)', [API_KEY_CHANGED_CHANNEL, data.key_id]));
          break;
        }
      }
    }
  },
};
