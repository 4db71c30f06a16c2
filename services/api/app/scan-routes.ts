import type pg from 'pg';
import type { ServiceContext } from '../../../shared/service-context.js';
import { prepared } from '../../../shared/db/prepared.js';
import { canonicalBodyHash, submitHandheldScans } from '../../../shared/domain/scans/commands.js';
import { handheldSubmissionSchema } from '../../../shared/domain/scans/schema.js';
import { resolveTag } from '../../../shared/domain/scans/resolve.js';
import type { TagResolution } from '../../../shared/domain/scans/read-codec.js';
import { appRoute, type AppRoute } from './pipeline.js';

/**
 * Scanning in the console (docs/web-app.md, "Scanning in the console"): a person's handheld
 * submission, with the body and the rules of `POST /ingest/v1/scans` (the same command handler,
 * so the same submission_id never counts twice), their session instead of an ingestion key, and
 * the person recorded as who scanned in the events' metadata. The answer adds what each read placed.
 */

/** An asset a read placed, as the page shows it: name first, key second. */
interface PlacedAsset {
  id: number;
  external_key: string | null;
  name: string;
}

async function assetsByIds(pool: pg.Pool, orgId: number, ids: readonly number[]): Promise<Map<number, PlacedAsset>> {
  if (ids.length === 0) return new Map();
  const result = await pool.query<PlacedAsset>(prepared('SELECT id, external_key, name FROM assets WHERE org_id = $1 AND id = ANY($2::int[])', [orgId, [...new Set(ids)]]));
  return new Map(result.rows.map((row) => [row.id, row]));
}

export function scanRoutes(ctx: ServiceContext): AppRoute[] {
  return [
    appRoute({
      method: 'POST',
      path: '/scans',
      access: 'operator',
      body: handheldSubmissionSchema,
      async handler({ caller, body, sentBody }) {
        const orgId = caller!.org!.id;
        const receivedUs = Date.now() * 1000;
        const reads = body.reads.map((read) => ({ tag_type: read.tag_type, value: read.value, observedUs: read.observed_at ?? receivedUs, rssi: read.rssi ?? null }));
        const { answer, reads: recorded } = await submitHandheldScans(
          ctx,
          { orgId, submissionId: body.submission_id, deviceId: body.device_id, location: body.location, reads, bodySha256: canonicalBodyHash(sentBody) },
          { actor: 'context' },
        );
        // A repeat decided nothing: its reads are shown as the tags resolve now.
        const resolutions: TagResolution[] = recorded ?? (await ctx.readModels.lookupTags(orgId, reads)).map(resolveTag);
        const assets = await assetsByIds(ctx.pool, orgId, resolutions.flatMap((r) => (r.assetId === null ? [] : [r.assetId])));
        const placed = reads.map((read, i) => {
          const { assetId, cause } = resolutions[i]!;
          return { tag_type: read.tag_type, value: read.value, asset: assetId === null ? null : (assets.get(assetId) ?? { id: assetId, external_key: null, name: '' }), cause };
        });
        return { status: 202, body: { data: { ...answer, reads: placed } } };
      },
    }),
  ];
}
