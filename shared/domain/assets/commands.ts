import { ConflictError, NotFoundError } from '../../errors.js';
import type { ServiceContext } from '../../context.js';
import { executeCommand, waitForStream } from '../command.js';
import { nextId, nextIdAndMintedKey, nextMintedKey } from '../ids.js';
import { claim, createReservation, readReservation, release, type Reservation } from '../reservations.js';
import { prepareTagAttachments, tagInput, tagReleases } from '../tags/commands.js';
import { decideCreate, decideDelete, decideRename, decideUpdate, fold, patchStateErrors, type AssetPatch } from './decider.js';
import type { FieldError } from '../../errors.js';
import { assetStream } from './events.js';
import type { CreateAssetBody } from './schema.js';

/**
 * Asset command handlers: load the stream, decide, append the asset stream together with the
 * external_key and tag reservations in one atomic call (executeCommand retries a lost race and
 * waits for the projections), so the caller's next read sees the change.
 */

const OWNER = 'asset';

function keyConflict(key: string): ConflictError {
  return new ConflictError(`external_key "${key}" is already in use by another asset`);
}

async function loadAsset(ctx: ServiceContext, orgId: number, assetId: number) {
  const streamId = assetStream(orgId, assetId);
  const events = await ctx.store.readStream(streamId);
  const expectedRevision = events.length > 0 ? events[events.length - 1]!.revision : ('no_stream' as const);
  return { streamId, state: fold(events), expectedRevision };
}

export async function createAsset(ctx: ServiceContext, orgId: number, body: CreateAssetBody): Promise<number> {
  const now = new Date();
  const at = now.toISOString();
  const allocated =
    body.external_key === undefined ? await nextIdAndMintedKey(ctx.pool, 'asset_ids', orgId, 'asset') : { id: await nextId(ctx.pool, 'asset_ids'), mintedKey: null };
  const assetId = allocated.id;
  const holder = { ownerType: OWNER, ownerId: assetId };
  let mintedKey = allocated.mintedKey;
  await executeCommand(ctx, async (attempt) => {
    let reservation: Reservation;
    if (body.external_key !== undefined) {
      reservation = await createReservation(ctx.store, attempt, 'asset-key', orgId, body.external_key);
      if (reservation.holder) throw keyConflict(body.external_key);
    } else {
      // Auto-mint only when the key is absent; skip numbers a caller already took by hand.
      for (;;) {
        mintedKey ??= await nextMintedKey(ctx.pool, orgId, 'asset');
        reservation = await createReservation(ctx.store, attempt, 'asset-key', orgId, mintedKey);
        if (!reservation.holder) break;
        mintedKey = null;
      }
    }
    const tags = await prepareTagAttachments(ctx, { orgId, ownerType: 'asset', ownerId: assetId }, body.tags ?? [], at);
    const events = decideCreate(
      {
        orgId,
        assetId,
        externalKey: reservation.value,
        minted: body.external_key === undefined,
        name: body.name,
        description: body.description ?? null,
        isActive: body.is_active ?? true,
        validFrom: body.valid_from ?? null,
        validTo: body.valid_to ?? null,
        metadata: body.metadata ?? {},
        tags: (body.tags ?? []).map((t, i) => ({ tagId: tags.tagIds[i]!, input: tagInput(t) })),
        at,
      },
      null,
    );
    return {
      appends: [{ streamId: assetStream(orgId, assetId), expectedRevision: 'no_stream' as const, events }, claim(reservation, holder, at), ...tags.claims],
      result: assetId,
    };
  });
  return assetId;
}

export async function updateAsset(ctx: ServiceContext, orgId: number, assetId: number, patch: AssetPatch): Promise<void> {
  const now = new Date();
  const at = now.toISOString();
  const { append } = await executeCommand(ctx, async () => {
    const { streamId, state, expectedRevision } = await loadAsset(ctx, orgId, assetId);
    if (!state || state.deleted_at !== null) throw new NotFoundError(`Asset ${assetId} not found`);
    const needsLocation = patch.location_id !== undefined || patch.location_external_key !== undefined;
    const currentLocation = needsLocation ? await ctx.reads.currentAssetLocation(orgId, assetId) : { id: null, external_key: null };
    const events = decideUpdate({ assetId, patch, currentLocation, now, at }, state);
    return { appends: [{ streamId, expectedRevision, events }], result: undefined };
  });
  // A no-op appends nothing: still make sure the read model shows everything the stream has.
  if (!append) await waitForStream(ctx, assetStream(orgId, assetId));
}

export async function renameAsset(ctx: ServiceContext, orgId: number, assetId: number, externalKey: string): Promise<void> {
  const at = new Date().toISOString();
  const holder = { ownerType: OWNER, ownerId: assetId };
  const { append } = await executeCommand(ctx, async () => {
    const { streamId, state, expectedRevision } = await loadAsset(ctx, orgId, assetId);
    const events = decideRename({ assetId, externalKey, at }, state);
    if (events.length === 0 || !state) return { appends: [], result: undefined };
    const reservation = await readReservation(ctx.store, 'asset-key', orgId, externalKey);
    if (reservation.holder) throw keyConflict(externalKey);
    return {
      appends: [
        { streamId, expectedRevision, events },
        claim(reservation, holder, at),
        release('asset-key', orgId, state.external_key, holder, at),
      ],
      result: undefined,
    };
  });
  if (!append) await waitForStream(ctx, assetStream(orgId, assetId));
}

export async function deleteAsset(ctx: ServiceContext, orgId: number, assetId: number): Promise<void> {
  const at = new Date().toISOString();
  const holder = { ownerType: OWNER, ownerId: assetId };
  await executeCommand(ctx, async () => {
    const { streamId, state, expectedRevision } = await loadAsset(ctx, orgId, assetId);
    const events = decideDelete({ assetId, at }, state);
    const live = state!;
    return {
      appends: [
        { streamId, expectedRevision, events },
        release('asset-key', orgId, live.external_key, holder, at),
        ...tagReleases({ orgId, ownerType: 'asset', ownerId: assetId }, live.tags, at),
      ],
      result: undefined,
    };
  });
}

/** For a PATCH body the schema refused: the errors that need the asset's state, to report with the schema's. */
export async function assetPatchStateErrors(ctx: ServiceContext, orgId: number, assetId: number, body: Record<string, unknown>): Promise<FieldError[]> {
  const { state } = await loadAsset(ctx, orgId, assetId);
  const needsLocation = body.location_id !== undefined || body.location_external_key !== undefined;
  const currentLocation = needsLocation ? await ctx.reads.currentAssetLocation(orgId, assetId) : { id: null, external_key: null };
  // An external_key the schema already refused (pattern, length) is reported once, by the schema.
  return patchStateErrors(body, state, currentLocation, new Date());
}
