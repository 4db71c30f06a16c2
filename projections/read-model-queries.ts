import type pg from 'pg';
import { prepared } from '../shared/db/prepared.js';
import type { ReadModelQueries } from '../shared/domain/read-model-queries.js';
import { currentAssetLocation, findExistingAssetIds } from './assets/queries.js';
import { countExistingAssetsAt, countExistingDescendants, findExistingNode } from './locations/queries.js';
import { findApiKeyStates } from './orgs-and-keys/queries.js';
import { findSessionTokenState } from './people/queries.js';
import { lookupTags } from './tags/queries.js';
import { readerOrgs, scanPointLocations } from './readers/queries.js';

/** The read models' answers to the write side's questions, over the current read model. */
export function readModelQueries(pool: pg.Pool): ReadModelQueries {
  return {
    findExistingLocation: (orgId, by) => findExistingNode(pool, orgId, by),
    countExistingDescendants: (orgId, id) => countExistingDescendants(pool, orgId, id),
    countExistingAssetsAt: (orgId, id) => countExistingAssetsAt(pool, orgId, id),
    currentAssetLocation: (orgId, assetId) => currentAssetLocation(pool, orgId, assetId),
    findExistingAssetIds: (orgId, assetIds) => findExistingAssetIds(pool, orgId, assetIds),
    findApiKeyStates: (keyIds) => findApiKeyStates(pool, keyIds),
    findSessionTokenState: (sessionId, orgId) => findSessionTokenState(pool, sessionId, orgId),
    lookupTags: (orgId, tags) => lookupTags(pool, orgId, tags),
    readerOrgs: (readerIds) => readerOrgs(pool, readerIds),
    scanPointLocations: (readerIds) => scanPointLocations(pool, readerIds),
    async findExternalKey(orgId, ownerType, id) {
      const table = ownerType === 'location' ? 'locations' : 'assets';
      const result = await pool.query<{ external_key: string }>(prepared(`SELECT external_key FROM ${table} WHERE id = $1 AND org_id = $2`, [id, orgId]));
      return result.rows[0]?.external_key ?? null;
    },
  };
}
