import type { CreateLocationBody } from './schema.js';
import { scanPlacementClosure, scanPlacementReopening } from '../scans/commands.js';
import { locationScansStream } from '../scans/events.js';
import type { ExpectedRevision, StreamAppend } from '../../event-store/port.js';
import type { FieldError } from '../../errors.js';
import type { CommandPort } from '../port.js';
import { executeCommand, loadStream, waitForStream } from '../command.js';
import { newEntity } from '../external-keys.js';
import { claim, readReservation, release } from '../reservations.js';
import { tagEvents } from '../tags/events.js';
import type { TagBody } from '../tags/schema.js';
import { readTagsToAttach, tagClaims, tagReleases } from '../tags/commands.js';
import { locationDecider, locationNotFound, locationPatchStateErrors, type LocationState, type LocationStreamEvent, type UpdateLocation } from './decider.js';
import { attachTags, tagReservationValue } from '../tags/decider.js';
import { lookupBy, type ParentLookup, type ParentRef } from './parent.js';
import { LocationTreeChanged, locationEvents, locationStream, locationTreeStream, type LocationTreeChangedData } from './events.js';

/**
 * Location command handlers: load → decide → append atomically → wait for the projections.
 *
 * Tree invariants (no cycles; a parent is an existing location of the org; delete only a leaf with no
 * existing assets) span several location streams, so every tree-shape change (create under a parent,
 * re-parent, delete) also appends to the per-org stream `location-tree-<org>` with the revision
 * it read, after waiting until the read model reflects that revision (`waitForStream`). Two
 * concurrent tree changes in one org therefore never both decide from the same tree: the second
 * append fails on the tree stream's revision and its retry decides again from the newer tree.
 * Root creates need no lock: a new root cannot take part in a cycle or hide under a deleted node.
 */

const OWNER = (id: number) => ({ ownerType: 'location', ownerId: id });
// Tree changes of one org queue behind each other in a process (serializeOn); those of other
// processes still race on the tree stream: give them room to retry.
const TREE_ATTEMPTS = 200;
const STREAM_EVENTS = [...locationEvents, ...tagEvents];

async function loadLocation(ctx: CommandPort, orgId: number, id: number): Promise<{ state: LocationState; revision: ExpectedRevision }> {
  const { state, expectedRevision } = await loadStream(ctx, locationStream(orgId, id), locationDecider, STREAM_EVENTS);
  return { state, revision: expectedRevision };
}

function treeAppend(orgId: number, expected: bigint | 'no_stream', data: Omit<LocationTreeChangedData, 'org_id'>): StreamAppend {
  return {
    streamId: locationTreeStream(orgId),
    expectedRevision: expected,
    events: [{ type: LocationTreeChanged.type, data: { org_id: orgId, ...data } }],
  };
}

/** The existing location a parent reference names, if any (parent.ts, lookupBy). */
async function lookupParent(ctx: CommandPort, orgId: number, ref: ParentRef): Promise<ParentLookup> {
  const by = lookupBy(ref);
  return { ref, found: by === null ? null : await ctx.readModels.findExistingLocation(orgId, by) };
}

export interface CreateInput {
  externalKey?: string;
  name: string;
  description: string | null;
  parent: ParentRef | null;
  isActive: boolean;
  validFrom: Date | null;
  validTo: Date | null;
  /** Embedded tags: attached all-or-nothing with the create. */
  tags: readonly TagBody[];
}

/** A `POST /locations` body (or an import's new row) as the command's input: the contract's defaults for what it leaves out. */
export function createInputOf(body: CreateLocationBody): CreateInput {
  return {
    externalKey: body.external_key,
    name: body.name,
    description: body.description ?? null,
    parent: body.parent,
    isActive: body.is_active ?? true,
    validFrom: body.valid_from ?? null,
    validTo: body.valid_to ?? null,
    tags: body.tags ?? [],
  };
}

export async function createLocation(ctx: CommandPort, orgId: number, input: CreateInput): Promise<number> {
  const { id, keyReservation } = await newEntity(ctx, 'location', orgId, input.externalKey);
  const owner = { orgId, ownerType: 'location' as const, ownerId: id };
  const at = new Date().toISOString();
  await executeCommand(
    ctx,
    async (attempt) => {
      let treeRevision: bigint | 'no_stream' | null = null;
      let parent: ParentLookup | null = null;
      if (input.parent) {
        treeRevision = await waitForStream(ctx, locationTreeStream(orgId));
        parent = await lookupParent(ctx, orgId, input.parent);
      }

      const [reservation, tags] = await Promise.all([keyReservation(attempt), readTagsToAttach(ctx, orgId, input.tags, attempt)]);

      const events = locationDecider.decide(
        {
          type: 'CreateLocation',
          orgId,
          locationId: id,
          externalKey: reservation.value,
          keyTaken: reservation.holder !== null,
          name: input.name,
          description: input.description,
          parent,
          isActive: input.isActive,
          validFrom: input.validFrom,
          validTo: input.validTo,
          tags: tags.requests,
          at,
        },
        locationDecider.initialState,
      );
      const appends: StreamAppend[] = [
        { streamId: locationStream(orgId, id), expectedRevision: 'no_stream', events },
        claim(reservation, OWNER(id), at),
        ...tagClaims(tags, owner, at),
      ];
      const created = events.find((e) => e.type === 'LocationCreated');
      if (created && created.data.parent_id !== null && treeRevision !== null) {
        appends.push(treeAppend(orgId, treeRevision, { location_id: id, change: 'created', parent_id: created.data.parent_id, at }));
      }
      return { appends, result: id };
    },
    { maxAttempts: TREE_ATTEMPTS, serializeOn: input.parent ? locationTreeStream(orgId) : undefined },
  );
  return id;
}

export interface UpdateInput {
  changes: UpdateLocation['changes'];
  /** Absent: the body names no parent; null: detach to the root. */
  parent?: ParentRef | null;
  /** The body as sent, for the read-only step (accept-if-matches). */
  sent: Readonly<Record<string, unknown>>;
  /**
   * An import's row (docs/api.md, "Import"): tags to attach in the same command, those the
   * location does not have yet (none is detached).
   */
  tags?: readonly TagBody[];
}

/** True when it appended (a no-op appends nothing). */
export async function updateLocation(ctx: CommandPort, orgId: number, id: number, input: UpdateInput): Promise<boolean> {
  const at = new Date().toISOString();
  const { append } = await executeCommand(
    ctx,
    async (attempt) => {
      const ref = input.parent;
      const treeRevision = ref !== undefined ? await waitForStream(ctx, locationTreeStream(orgId)) : null;
      const [{ state, revision }, parent] = await Promise.all([loadLocation(ctx, orgId, id), ref ? lookupParent(ctx, orgId, ref) : ref]);
      const events: LocationStreamEvent[] = locationDecider.decide({ type: 'UpdateLocation', changes: input.changes, sent: input.sent, parent, at }, state);
      const owner = { orgId, ownerType: 'location' as const, ownerId: id };
      const held = new Set(state.status === 'existing' ? state.tags.map((t) => tagReservationValue(t.tagType, t.value)) : []);
      const attach = await readTagsToAttach(ctx, orgId, (input.tags ?? []).filter((t) => !held.has(tagReservationValue(t.tag_type, t.value))), attempt);
      events.push(...attachTags(owner, attach.requests, at));
      const appends: StreamAppend[] = [{ streamId: locationStream(orgId, id), expectedRevision: revision, events }, ...tagClaims(attach, owner, at)];
      const moved = events.find((e) => e.type === 'LocationMoved');
      if (moved && treeRevision !== null) {
        appends.push(treeAppend(orgId, treeRevision, { location_id: id, change: 'moved', parent_id: moved.data.parent_id, at }));
      }
      return { appends: events.length > 0 ? appends : [], result: undefined };
    },
    { maxAttempts: TREE_ATTEMPTS, serializeOn: input.parent !== undefined ? locationTreeStream(orgId) : undefined },
  );
  // A no-op appends nothing: still make sure the read model shows everything the stream has.
  if (!append) await waitForStream(ctx, locationStream(orgId, id));
  return append !== null;
}

export async function renameLocation(ctx: CommandPort, orgId: number, id: number, externalKey: string): Promise<void> {
  const at = new Date().toISOString();
  const { append } = await executeCommand(ctx, async () => {
    const [{ state, revision }, reservation] = await Promise.all([
      loadLocation(ctx, orgId, id),
      readReservation(ctx.store, 'location-key', orgId, externalKey),
    ]);
    const events = locationDecider.decide({ type: 'RenameLocation', externalKey, keyTaken: reservation.holder !== null, at }, state);
    const renamed = events.find((e) => e.type === 'LocationRenamed');
    if (!renamed) return { appends: [], result: undefined };
    return {
      appends: [
        { streamId: locationStream(orgId, id), expectedRevision: revision, events },
        claim(reservation, OWNER(id), at),
        release('location-key', orgId, renamed.data.previous_external_key, OWNER(id), at),
      ],
      result: undefined,
    };
  });
  if (!append) await waitForStream(ctx, locationStream(orgId, id));
}

/** Soft-deletes a leaf; its tags are retired in the same append, freeing their values. */
export async function deleteLocation(ctx: CommandPort, orgId: number, id: number): Promise<void> {
  const at = new Date().toISOString();
  const owner = { orgId, ownerType: 'location' as const, ownerId: id };
  await executeCommand(
    ctx,
    async () => {
      const treeRevision = await waitForStream(ctx, locationTreeStream(orgId));
      const { state, revision } = await loadLocation(ctx, orgId, id);
      if (state.status !== 'existing') throw locationNotFound();
      // Every scan placed here so far is projected before the placed assets are counted, and the
      // delete closes the location's scans at that revision: a scan that races it fails (and is
      // then recorded as placing nothing), or it lands first and this attempt retries and sees it.
      const scansRevision = await waitForStream(ctx, locationScansStream(orgId, id));
      const existingDescendants = await ctx.readModels.countExistingDescendants(orgId, id);
      const existingAssets = existingDescendants > 0 ? 0 : await ctx.readModels.countExistingAssetsAt(orgId, id);
      const events = locationDecider.decide({ type: 'DeleteLocation', existingDescendants, existingAssets, at }, state);
      return {
        appends: [
          { streamId: locationStream(orgId, id), expectedRevision: revision, events },
          release('location-key', orgId, state.externalKey, OWNER(id), at),
          treeAppend(orgId, treeRevision, { location_id: id, change: 'deleted', parent_id: state.parentId, at }),
          scanPlacementClosure(orgId, id, scansRevision, at),
          ...tagReleases(owner, events, at),
        ],
        result: undefined,
      };
    },
    { maxAttempts: TREE_ATTEMPTS, serializeOn: locationTreeStream(orgId) },
  );
}

/**
 * Makes a soft-deleted location existing again under its parent (docs/api.md, "Restoring"): under
 * the tree lock (a parent's delete and a child's restore never both decide from the same tree),
 * it claims its external_key back and reopens its scans in the same append. A no-op for an
 * existing location. True when it appended.
 */
export async function restoreLocation(ctx: CommandPort, orgId: number, id: number): Promise<boolean> {
  const at = new Date().toISOString();
  const { append } = await executeCommand(
    ctx,
    async () => {
      const treeRevision = await waitForStream(ctx, locationTreeStream(orgId));
      const { state, revision } = await loadLocation(ctx, orgId, id);
      if (state.status !== 'deleted') {
        locationDecider.decide({ type: 'RestoreLocation', parentExists: true, parentExternalKey: null, keyTaken: false, at }, state);
        return { appends: [], result: undefined };
      }
      const parentId = state.parentId;
      const [parent, parentKey, reservation, scans] = await Promise.all([
        parentId === null ? null : ctx.readModels.findExistingLocation(orgId, { id: parentId }),
        parentId === null ? null : ctx.readModels.findExternalKey(orgId, 'location', parentId),
        readReservation(ctx.store, 'location-key', orgId, state.externalKey),
        ctx.store.readStream(locationScansStream(orgId, id), { direction: 'backwards', maxCount: 1 }),
      ]);
      const events = locationDecider.decide(
        { type: 'RestoreLocation', parentExists: parent !== null, parentExternalKey: parentKey, keyTaken: reservation.holder !== null, at },
        state,
      );
      const scansRevision = scans[0] ? scans[0].revision : ('no_stream' as const);
      return {
        appends: [
          { streamId: locationStream(orgId, id), expectedRevision: revision, events },
          claim(reservation, OWNER(id), at),
          treeAppend(orgId, treeRevision, { location_id: id, change: 'restored', parent_id: parentId, at }),
          scanPlacementReopening(orgId, id, scansRevision, at),
        ],
        result: undefined,
      };
    },
    { maxAttempts: TREE_ATTEMPTS, serializeOn: locationTreeStream(orgId) },
  );
  if (!append) await waitForStream(ctx, locationStream(orgId, id));
  return append !== null;
}

/** For a PATCH body the schema refused: the errors that need the location's state, to report with the schema's. */
export async function locationPatchStateErrorsOf(ctx: CommandPort, orgId: number, id: number, body: Record<string, unknown>): Promise<FieldError[]> {
  const { state } = await loadLocation(ctx, orgId, id);
  return locationPatchStateErrors(body, state, new Date().toISOString());
}
