import { scanPlacementClosure } from '../scans/commands.js';
import { locationScansStream } from '../scans/events.js';
import { ConflictError, ValidationFailed, fieldErrors } from '../../errors.js';
import type { EventData, ExpectedRevision, StreamAppend } from '../../event-store/port.js';
import type { ServiceContext } from '../../context.js';
import { executeCommand, waitForStream } from '../command.js';
import { nextId, nextIdAndMintedKey, nextMintedKey } from '../ids.js';
import { claim, createReservation, readReservation, release, type Reservation } from '../reservations.js';
import { decide, fold, locationNotFound, type LocationState, type TreeNode, type UpdateLocation } from './decider.js';
import {
  LocationCreated,
  LocationDeleted,
  LocationMoved,
  LocationRenamed,
  LocationTreeChanged,
  LocationUpdated,
  locationStream,
  locationTreeStream,
  type LocationEvent,
  type LocationTreeChangedData,
} from './events.js';
import { evolveTags, type TagOwnerRef, type TagState } from '../tags/decider.js';
import type { TagBody } from '../tags/schema.js';
import { prepareTagAttachments, retireTags } from '../tags/commands.js';

/**
 * Location command handlers: load → decide → append atomically → wait for the projections.
 *
 * Tree invariants (no cycles; a parent is a live location of the org; delete only a leaf with no
 * live assets) span several location streams, so every tree-shape change (create under a parent,
 * re-parent, delete) also appends to the per-org stream `location-tree-<org>` with the revision
 * it read, after waiting until the read model reflects that revision (`waitForStream`). Two
 * concurrent tree changes in one org therefore never both decide from the same tree: the second
 * append fails on the tree stream's revision and its retry decides again from the newer tree.
 * Root creates need no lock: a new root cannot take part in a cycle or hide under a deleted node.
 */

const LOCATION_TYPES = new Set<string>([LocationCreated.type, LocationUpdated.type, LocationMoved.type, LocationRenamed.type, LocationDeleted.type]);
const OWNER = (id: number) => ({ ownerType: 'location', ownerId: id });
// Tree changes of one org queue behind each other; give them room to retry.
const TREE_ATTEMPTS = 200;

interface Loaded {
  state: LocationState;
  revision: ExpectedRevision;
  /** Its live tags, from the same read. */
  tags: TagState[];
}

function tagOwner(orgId: number, id: number): TagOwnerRef {
  return { orgId, ownerType: 'location', ownerId: id };
}

/** Folds the location's own events (its stream also carries its tags' events, which the decider ignores). */
async function loadLocation(ctx: ServiceContext, orgId: number, id: number): Promise<Loaded> {
  const events = await ctx.store.readStream(locationStream(orgId, id));
  const last = events[events.length - 1];
  const own = events.filter((e) => LOCATION_TYPES.has(e.type)).map((e) => ({ type: e.type, data: e.data }) as LocationEvent);
  return { state: fold(own), revision: last ? last.revision : 'no_stream', tags: events.reduce<TagState[]>(evolveTags, []) };
}

function toEventData(events: LocationEvent[]): EventData[] {
  return events.map((e) => ({ type: e.type, data: e.data as unknown as EventData['data'] }));
}

function treeAppend(orgId: number, expected: bigint | 'no_stream', data: Omit<LocationTreeChangedData, 'org_id'>): StreamAppend {
  return {
    streamId: locationTreeStream(orgId),
    expectedRevision: expected,
    events: [{ type: LocationTreeChanged.type, data: { org_id: orgId, ...data } }],
  };
}

function keyTaken(key: string): ConflictError {
  return new ConflictError(`external_key "${key}" is already used by another location`);
}

export type ParentRef = { field: 'parent_id'; id: number } | { field: 'parent_external_key'; externalKey: string };

async function resolveParent(ctx: ServiceContext, orgId: number, ref: ParentRef): Promise<TreeNode & { externalKey: string }> {
  const node = await ctx.reads.findLiveLocation(orgId, ref.field === 'parent_id' ? { id: ref.id } : { externalKey: ref.externalKey });
  if (!node) {
    throw new ValidationFailed([
      fieldErrors.fkNotFound(
        ref.field,
        ref.field === 'parent_id' ? `parent_id ${ref.id} does not reference a live location` : `parent_external_key "${ref.externalKey}" does not reference a live location`,
      ),
    ]);
  }
  return node;
}

export interface CreateInput {
  externalKey?: string;
  name: string;
  description: string | null;
  parent: ParentRef | null;
  isActive: boolean;
  validFrom: string | null;
  validTo: string | null;
  /** Embedded tags: attached all-or-nothing with the create. */
  tags: readonly TagBody[];
}

export async function createLocation(ctx: ServiceContext, orgId: number, input: CreateInput): Promise<number> {
  const allocated =
    input.externalKey === undefined
      ? await nextIdAndMintedKey(ctx.pool, 'location_ids', orgId, 'location')
      : { id: await nextId(ctx.pool, 'location_ids'), mintedKey: null };
  const id = allocated.id;
  const at = new Date().toISOString();
  let minted = allocated.mintedKey;
  await executeCommand(
    ctx,
    async (attempt) => {
      let treeRevision: bigint | 'no_stream' | null = null;
      let parent: TreeNode | null = null;
      if (input.parent) {
        treeRevision = await waitForStream(ctx, locationTreeStream(orgId));
        parent = await resolveParent(ctx, orgId, input.parent);
      }

      let reservation: Reservation;
      if (input.externalKey !== undefined) {
        reservation = await createReservation(ctx.store, attempt, 'location-key', orgId, input.externalKey);
        if (reservation.holder) throw keyTaken(input.externalKey);
      } else {
        // Auto-mint only when absent; skip values a caller already holds as their own key.
        for (;;) {
          minted ??= await nextMintedKey(ctx.pool, orgId, 'location');
          reservation = await createReservation(ctx.store, attempt, 'location-key', orgId, minted);
          if (!reservation.holder) break;
          minted = null;
        }
      }

      const events = decide(
        {
          type: 'CreateLocation',
          orgId,
          locationId: id,
          externalKey: reservation.value,
          name: input.name,
          description: input.description,
          parent,
          isActive: input.isActive,
          validFrom: input.validFrom,
          validTo: input.validTo,
          at,
        },
        { status: 'absent' },
      );
      // Tag events go on the new location's own stream, after its creation; their values are
      // claimed in the same atomic append.
      const tags = input.tags.length > 0 ? await prepareTagAttachments(ctx, tagOwner(orgId, id), input.tags, at) : { events: [], claims: [] };
      const appends: StreamAppend[] = [
        { streamId: locationStream(orgId, id), expectedRevision: 'no_stream', events: [...toEventData(events), ...tags.events] },
        claim(reservation, OWNER(id), at),
        ...tags.claims,
      ];
      if (parent && treeRevision !== null) {
        appends.push(treeAppend(orgId, treeRevision, { location_id: id, change: 'created', parent_id: parent.id, at }));
      }
      return { appends, result: id };
    },
    { maxAttempts: TREE_ATTEMPTS },
  );
  return id;
}

/** What a PATCH body asks of the parent: nothing, a detach (null), or a reference to resolve. */
export type ParentChange =
  | { kind: 'none' }
  | { kind: 'detach' }
  | { kind: 'ref'; ref: ParentRef }
  /** Both forms, not null: they must name the same live location. */
  | { kind: 'both'; id: number; externalKey: string };

export interface UpdateInput {
  changes: UpdateLocation['changes'];
  parent: ParentChange;
  /** Read-only checks against the current view (accept-if-matches); throws ValidationFailed. */
  checkReadOnly: () => Promise<void>;
}

export async function updateLocation(ctx: ServiceContext, orgId: number, id: number, input: UpdateInput): Promise<void> {
  const at = new Date().toISOString();
  await executeCommand(
    ctx,
    async () => {
      const wantsTree = input.parent.kind !== 'none';
      const treeRevision = wantsTree ? await waitForStream(ctx, locationTreeStream(orgId)) : null;
      const { state, revision } = await loadLocation(ctx, orgId, id);
      if (state.status !== 'live') throw locationNotFound();
      await input.checkReadOnly();

      let move: UpdateLocation['move'];
      const p = input.parent;
      if (p.kind === 'detach') move = { parent: null };
      else if (p.kind === 'both') {
        const node = await ctx.reads.findLiveLocation(orgId, { externalKey: p.externalKey });
        if (!node || node.id !== p.id) throw new ValidationFailed(fieldErrors.ambiguous(['parent_id', 'parent_external_key']));
        move = { parent: node };
      } else if (p.kind === 'ref') {
        // Accept-if-matches first: the current parent is accepted as is, with no lookup.
        if (p.ref.field === 'parent_id' && p.ref.id === state.parentId) move = undefined;
        else move = { parent: await resolveParent(ctx, orgId, p.ref) };
      }

      const events = decide({ type: 'UpdateLocation', changes: input.changes, move, at }, state);
      const appends: StreamAppend[] = [{ streamId: locationStream(orgId, id), expectedRevision: revision, events: toEventData(events) }];
      const movedEvent = events.find((e) => e.type === 'LocationMoved');
      if (movedEvent && treeRevision !== null) {
        appends.push(treeAppend(orgId, treeRevision, { location_id: id, change: 'moved', parent_id: movedEvent.data.parent_id, at }));
      }
      return { appends: events.length > 0 ? appends : [], result: undefined };
    },
    { maxAttempts: TREE_ATTEMPTS },
  );
}

export async function renameLocation(ctx: ServiceContext, orgId: number, id: number, externalKey: string): Promise<void> {
  const at = new Date().toISOString();
  await executeCommand(ctx, async () => {
    const { state, revision } = await loadLocation(ctx, orgId, id);
    const events = decide({ type: 'RenameLocation', externalKey, at }, state);
    if (events.length === 0 || state.status === 'absent') return { appends: [], result: undefined };
    const reservation = await readReservation(ctx.store, 'location-key', orgId, externalKey);
    if (reservation.holder) throw keyTaken(externalKey);
    return {
      appends: [
        { streamId: locationStream(orgId, id), expectedRevision: revision, events: toEventData(events) },
        claim(reservation, OWNER(id), at),
        release('location-key', orgId, state.externalKey, OWNER(id), at),
      ],
      result: undefined,
    };
  });
}

/** Soft-deletes a leaf; its tags are retired in the same append, freeing their values. */
export async function deleteLocation(ctx: ServiceContext, orgId: number, id: number): Promise<void> {
  const at = new Date().toISOString();
  await executeCommand(
    ctx,
    async () => {
      const treeRevision = await waitForStream(ctx, locationTreeStream(orgId));
      const { state, revision, tags: liveTags } = await loadLocation(ctx, orgId, id);
      if (state.status !== 'live') throw locationNotFound();
      // Every scan placed here so far is projected before the placed assets are counted, and the
      // delete closes the location's scans at that revision: a scan that races it fails (and is
      // then recorded as placing nothing), or it lands first and this attempt retries and sees it.
      const scansRevision = await waitForStream(ctx, locationScansStream(orgId, id));
      const liveDescendants = await ctx.reads.countLiveDescendants(orgId, id);
      const liveAssets = liveDescendants > 0 ? 0 : await ctx.reads.countLiveAssetsAt(orgId, id);
      const events = decide({ type: 'DeleteLocation', liveDescendants, liveAssets, at }, state);
      const tags = retireTags(tagOwner(orgId, id), liveTags, at);
      return {
        appends: [
          { streamId: locationStream(orgId, id), expectedRevision: revision, events: [...tags.events, ...toEventData(events)] },
          release('location-key', orgId, state.externalKey, OWNER(id), at),
          treeAppend(orgId, treeRevision, { location_id: id, change: 'deleted', parent_id: state.parentId, at }),
          scanPlacementClosure(orgId, id, scansRevision, at),
          ...tags.releases,
        ],
        result: undefined,
      };
    },
    { maxAttempts: TREE_ATTEMPTS },
  );
}
