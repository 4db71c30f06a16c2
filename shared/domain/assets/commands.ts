import type { CommandPort } from '../port.js';
import type { FieldError } from '../../errors.js';
import type { ExpectedRevision } from '../../event-store/port.js';
import { executeCommand, loadStream, waitForStream, type CommandOptions } from '../command.js';
import { newEntity } from '../external-keys.js';
import { claim, readReservation, release } from '../reservations.js';
import { tagEvents } from '../tags/events.js';
import { readTagsToAttach, tagClaims, tagReleases } from '../tags/commands.js';
import { attachTags, tagReservationValue } from '../tags/decider.js';
import type { TagBody } from '../tags/schema.js';
import { assetDecider, patchStateErrors, type AssetPatch, type AssetState, type AssetStreamEvent } from './decider.js';
import { assetEvents, assetStream } from './events.js';
import type { CreateAssetBody } from './schema.js';

/**
 * Asset command handlers: read what the decision needs (the asset's stream, the reservations of
 * its key and tag values, the scan-derived location), decide, and append the asset stream
 * together with the reservation claims and releases in one atomic call (executeCommand retries a
 * lost race and waits for the projections), so the caller's next read sees the change.
 */

const OWNER = 'asset';
const STREAM_EVENTS = [...assetEvents, ...tagEvents];

function loadAsset(ctx: CommandPort, orgId: number, assetId: number): Promise<{ streamId: string; state: AssetState; expectedRevision: ExpectedRevision }> {
  const streamId = assetStream(orgId, assetId);
  return loadStream(ctx, streamId, assetDecider, STREAM_EVENTS).then((loaded) => ({ streamId, ...loaded }));
}

function currentLocationFor(ctx: CommandPort, orgId: number, assetId: number, body: { location_id?: unknown; location_external_key?: unknown }) {
  const needsLocation = body.location_id !== undefined || body.location_external_key !== undefined;
  return needsLocation ? ctx.readModels.currentAssetLocation(orgId, assetId) : Promise.resolve({ id: null, external_key: null });
}

/** `options`: how to wait for the projections (an import waits once, at its end: docs/api.md "Import"). */
export async function createAsset(ctx: CommandPort, orgId: number, body: CreateAssetBody, options: CommandOptions = {}): Promise<number> {
  const at = new Date().toISOString();
  const { id: assetId, keyReservation } = await newEntity(ctx, 'asset', orgId, body.external_key);
  const owner = { orgId, ownerType: 'asset' as const, ownerId: assetId };
  await executeCommand(ctx, async (attempt) => {
    const [reservation, tags] = await Promise.all([keyReservation(attempt), readTagsToAttach(ctx, orgId, body.tags ?? [], attempt)]);
    const events = assetDecider.decide(
      {
        type: 'CreateAsset',
        orgId,
        assetId,
        externalKey: reservation.value,
        minted: body.external_key === undefined,
        keyTaken: reservation.holder !== null,
        name: body.name,
        description: body.description ?? null,
        isActive: body.is_active ?? true,
        validFrom: body.valid_from ?? null,
        validTo: body.valid_to ?? null,
        metadata: body.metadata ?? {},
        tags: tags.requests,
        at,
      },
      assetDecider.initialState,
    );
    return {
      appends: [
        { streamId: assetStream(orgId, assetId), expectedRevision: 'no_stream' as const, events },
        claim(reservation, { ownerType: OWNER, ownerId: assetId }, at),
        ...tagClaims(tags, owner, at),
      ],
      result: assetId,
    };
  }, options);
  return assetId;
}

/**
 * An import's row for an asset that exists (docs/api.md, "Import"): one command that merge-patches
 * the fields given and attaches the tags it does not have yet (detaching none), in one append,
 * with the events, validation and refusals of PATCH and of attaching a tag. True when it appended.
 */
export async function mergeAsset(ctx: CommandPort, orgId: number, assetId: number, patch: AssetPatch, tags: readonly TagBody[], options: CommandOptions = {}): Promise<boolean> {
  const at = new Date().toISOString();
  const owner = { orgId, ownerType: 'asset' as const, ownerId: assetId };
  const { append } = await executeCommand(
    ctx,
    async (attempt) => {
      const { streamId, state, expectedRevision } = await loadAsset(ctx, orgId, assetId);
      const events: AssetStreamEvent[] = assetDecider.decide({ type: 'UpdateAsset', assetId, patch, currentLocation: { id: null, external_key: null }, at }, state);
      const held = new Set(state.status === 'existing' ? state.tags.map((t) => tagReservationValue(t.tagType, t.value)) : []);
      const toAttach = tags.filter((t) => !held.has(tagReservationValue(t.tag_type, t.value)));
      const attach = await readTagsToAttach(ctx, orgId, toAttach, attempt);
      events.push(...attachTags(owner, attach.requests, at));
      return { appends: events.length > 0 ? [{ streamId, expectedRevision, events }, ...tagClaims(attach, owner, at)] : [], result: undefined };
    },
    options,
  );
  return append !== null;
}

export async function updateAsset(ctx: CommandPort, orgId: number, assetId: number, patch: AssetPatch): Promise<void> {
  const at = new Date().toISOString();
  const { append } = await executeCommand(ctx, async () => {
    const [{ streamId, state, expectedRevision }, currentLocation] = await Promise.all([
      loadAsset(ctx, orgId, assetId),
      currentLocationFor(ctx, orgId, assetId, patch),
    ]);
    const events = assetDecider.decide({ type: 'UpdateAsset', assetId, patch, currentLocation, at }, state);
    return { appends: [{ streamId, expectedRevision, events }], result: undefined };
  });
  // A no-op appends nothing: still make sure the read model shows everything the stream has.
  if (!append) await waitForStream(ctx, assetStream(orgId, assetId));
}

export async function renameAsset(ctx: CommandPort, orgId: number, assetId: number, externalKey: string): Promise<void> {
  const at = new Date().toISOString();
  const holder = { ownerType: OWNER, ownerId: assetId };
  const { append } = await executeCommand(ctx, async () => {
    const [{ streamId, state, expectedRevision }, reservation] = await Promise.all([
      loadAsset(ctx, orgId, assetId),
      readReservation(ctx.store, 'asset-key', orgId, externalKey),
    ]);
    const events = assetDecider.decide({ type: 'RenameAsset', assetId, externalKey, keyTaken: reservation.holder !== null, at }, state);
    const renamed = events.find((e) => e.type === 'AssetRenamed');
    if (!renamed) return { appends: [], result: undefined };
    return {
      appends: [
        { streamId, expectedRevision, events },
        claim(reservation, holder, at),
        release('asset-key', orgId, renamed.data.previous_external_key, holder, at),
      ],
      result: undefined,
    };
  });
  if (!append) await waitForStream(ctx, assetStream(orgId, assetId));
}

export async function deleteAsset(ctx: CommandPort, orgId: number, assetId: number): Promise<void> {
  const at = new Date().toISOString();
  const owner = { orgId, ownerType: 'asset' as const, ownerId: assetId };
  await executeCommand(ctx, async () => {
    const { streamId, state, expectedRevision } = await loadAsset(ctx, orgId, assetId);
    const events = assetDecider.decide({ type: 'DeleteAsset', assetId, at }, state);
    const keyReleases = events.flatMap((e) => (e.type === 'AssetDeleted' ? [release('asset-key', orgId, e.data.external_key, { ownerType: OWNER, ownerId: assetId }, at)] : []));
    return {
      appends: [{ streamId, expectedRevision, events }, ...keyReleases, ...tagReleases(owner, events, at)],
      result: undefined,
    };
  });
}

/**
 * Makes a soft-deleted asset existing again (docs/api.md, "Restoring"), claiming its external_key
 * back in the same append; a no-op for an existing asset. True when it appended.
 */
export async function restoreAsset(ctx: CommandPort, orgId: number, assetId: number): Promise<boolean> {
  const at = new Date().toISOString();
  const { append } = await executeCommand(ctx, async () => {
    const { streamId, state, expectedRevision } = await loadAsset(ctx, orgId, assetId);
    const reservation = state.status === 'deleted' ? await readReservation(ctx.store, 'asset-key', orgId, state.externalKey) : null;
    const events = assetDecider.decide({ type: 'RestoreAsset', assetId, keyTaken: reservation !== null && reservation.holder !== null, at }, state);
    if (events.length === 0 || reservation === null) return { appends: [], result: undefined };
    return {
      appends: [{ streamId, expectedRevision, events }, claim(reservation, { ownerType: OWNER, ownerId: assetId }, at)],
      result: undefined,
    };
  });
  if (!append) await waitForStream(ctx, assetStream(orgId, assetId));
  return append !== null;
}

/** For a PATCH body the schema refused: the errors that need the asset's state, to report with the schema's. */
export async function assetPatchStateErrors(ctx: CommandPort, orgId: number, assetId: number, body: Record<string, unknown>): Promise<FieldError[]> {
  const [{ state }, currentLocation] = await Promise.all([loadAsset(ctx, orgId, assetId), currentLocationFor(ctx, orgId, assetId, body)]);
  return patchStateErrors(body, state, currentLocation, new Date().toISOString());
}
