import { DomainRefusal, refuse } from '../refusal.js';
import { fieldErrors, orderFieldErrors, type FieldError } from '../../errors.js';
import type { Decider } from '../decider.js';
import { validWindowError } from '../fields.js';
import { readOnlyErrors, sameInstant } from '../patch.js';
import { attachTags, embeddedTagViews, evolveTags, retireTags, type TagRequest, type TagState } from '../tags/decider.js';
import type { TagEvent } from '../tags/events.js';
import type { LocationEvent } from './events.js';
import { LOCATION_FIELD_ORDER } from './schema.js';
import { ambiguousParent, halfNamed, parentOf, type ParentLookup, type TreeNode } from './parent.js';

export type { ParentLookup, ParentRef, TreeNode } from './parent.js';

/**
 * The location decider: pure `evolve` and `decide`, no I/O. A location's stream carries its own
 * events and its tags' events. Facts that live outside it (the parent a body names and its path,
 * existing descendants, placed assets, whether a key or tag value is taken) are read by the command
 * handler (tree facts under the per-org tree lock) and passed in on the command.
 */

export interface LocationRecord {
  id: number;
  orgId: number;
  externalKey: string;
  name: string;
  description: string | null;
  parentId: number | null;
  isActive: boolean;
  validFrom: string | null;
  validTo: string | null;
  createdAt: string;
  updatedAt: string;
  deletedAt: string | null;
  /** Existing tags, in attach order. */
  tags: TagState[];
}

export type LocationState = { status: 'absent' } | ({ status: 'existing' | 'deleted' } & LocationRecord);

export const initialState: LocationState = { status: 'absent' };

/** The events of a location's stream. */
export type LocationStreamEvent = LocationEvent | TagEvent;

export function evolve(state: LocationState, event: LocationStreamEvent): LocationState {
  switch (event.type) {
    case 'LocationCreated': {
      const d = event.data;
      return {
        status: 'existing',
        id: d.location_id,
        orgId: d.org_id,
        externalKey: d.external_key,
        name: d.name,
        description: d.description,
        parentId: d.parent_id,
        isActive: d.is_active,
        validFrom: d.valid_from,
        validTo: d.valid_to,
        createdAt: d.at,
        updatedAt: d.at,
        deletedAt: null,
        tags: [],
      };
    }
    case 'LocationUpdated': {
      if (state.status === 'absent') return state;
      const c = event.data.changes;
      return {
        ...state,
        ...(c.name !== undefined ? { name: c.name } : {}),
        ...(c.description !== undefined ? { description: c.description } : {}),
        ...(c.is_active !== undefined ? { isActive: c.is_active } : {}),
        ...(c.valid_from !== undefined ? { validFrom: c.valid_from } : {}),
        ...(c.valid_to !== undefined ? { validTo: c.valid_to } : {}),
        updatedAt: event.data.at,
      };
    }
    case 'LocationMoved':
      if (state.status === 'absent') return state;
      return { ...state, parentId: event.data.parent_id, updatedAt: event.data.at };
    case 'LocationRenamed':
      if (state.status === 'absent') return state;
      return { ...state, externalKey: event.data.external_key, updatedAt: event.data.at };
    case 'LocationDeleted':
      if (state.status === 'absent') return state;
      return { ...state, status: 'deleted', deletedAt: event.data.at };
    case 'LocationRestored':
      if (state.status === 'absent') return state;
      return { ...state, status: 'existing', deletedAt: null, updatedAt: event.data.at };
    case 'TagAttached':
    case 'TagDetached':
      if (state.status === 'absent') return state;
      return { ...state, tags: evolveTags(state.tags, event) };
  }
}


export interface CreateLocation {
  type: 'CreateLocation';
  orgId: number;
  locationId: number;
  externalKey: string;
  /** Its reservation is held by another location (a minted key never is: the handler skips those). */
  keyTaken: boolean;
  name: string;
  description: string | null;
  parent: ParentLookup | null;
  isActive: boolean;
  validFrom: Date | null;
  validTo: Date | null;
  /** Embedded tags, attached all-or-nothing with the create. */
  tags: readonly TagRequest[];
  at: string;
}

export interface UpdateLocation {
  type: 'UpdateLocation';
  changes: {
    name?: string;
    description?: string | null;
    isActive?: boolean;
    validFrom?: Date | null;
    validTo?: Date | null;
  };
  /** The body as sent: its read-only fields are accepted when they match (docs/api.md "Changing a record: PATCH"). */
  sent: Readonly<Record<string, unknown>>;
  /** Present when the body names a parent: null detaches to the root. */
  parent?: ParentLookup | null;
  at: string;
}

export interface RenameLocation {
  type: 'RenameLocation';
  externalKey: string;
  /** The new key's reservation is held (by another location, or by this one when it is the same key). */
  keyTaken: boolean;
  at: string;
}

export interface DeleteLocation {
  type: 'DeleteLocation';
  existingDescendants: number;
  existingAssets: number;
  at: string;
}

export interface RestoreLocation {
  type: 'RestoreLocation';
  /** Its parent (when it has one) is an existing location, read under the tree lock. */
  parentExists: boolean;
  /** The parent's external_key, for the refusal's words (null when unknown). */
  parentExternalKey: string | null;
  /** The reservation of its external_key is held (by another location: its own was released with the delete). */
  keyTaken: boolean;
  at: string;
}

export type LocationCommand = CreateLocation | UpdateLocation | RenameLocation | DeleteLocation | RestoreLocation;

/** docs/api.md, "Restoring": a location comes back under its parent only. */
export function parentDeleted(parentId: number, parentExternalKey: string | null): string {
  const named = parentExternalKey === null ? `(id ${parentId})` : `"${parentExternalKey}" (id ${parentId})`;
  return `parent location ${named} is deleted; restore the parent first`;
}

export const DESCENDANTS_BLOCK_DELETE =
  'location has descendant locations; reassign or remove them before deleting (cascade is not supported)';
export const ASSETS_BLOCK_DELETE =
  'location has assets placed at it; move or remove them before deleting (cascade is not supported)';

export function locationNotFound(): DomainRefusal {
  return refuse.notFound('Location not found');
}

function keyTaken(key: string): DomainRefusal {
  return refuse.conflict(`external_key "${key}" is already used by another location`);
}

/** The existing location a parent reference names; throws the contract's error for it. */
function resolveParent(lookup: ParentLookup): TreeNode {
  const parent = parentOf(lookup);
  if (Array.isArray(parent)) throw refuse.invalid(parent);
  return parent;
}

/** What a PATCH body's read-only fields are compared with (accept-if-matches). */
function readOnlyView(state: LocationRecord, at: string) {
  return {
    id: state.id,
    external_key: state.externalKey,
    created_at: state.createdAt,
    updated_at: state.updatedAt,
    deleted_at: state.deletedAt,
    tags: embeddedTagViews(state.tags, new Date(at)),
  };
}

/**
 * The field errors of a PATCH body that need the location's state: read-only fields that differ,
 * a null valid_from over a set one. For a raw body whose schema check failed: the route reports
 * them with the schema's, so the caller gets every field error at once (`decide` reports them
 * itself when the schema passes).
 */
export function locationPatchStateErrors(body: Record<string, unknown>, state: LocationState, at: string): FieldError[] {
  if (state.status !== 'existing') return [];
  const errors = readOnlyErrors('locations', body, readOnlyView(state, at));
  if (body.valid_from === null && state.validFrom !== null) errors.push(fieldErrors.invalidValue('valid_from', 'valid_from must not be null'));
  return errors;
}

type LocationChanges = Extract<LocationEvent, { type: 'LocationUpdated' }>['data']['changes'];

/** A timestamp as the events carry it. */
function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

function decideCreate(command: CreateLocation, state: LocationState): LocationStreamEvent[] {
  if (state.status !== 'absent') throw refuse.conflict(`Location ${command.locationId} already exists`);
  const parent = command.parent ? resolveParent(command.parent) : null;
  if (command.keyTaken) throw keyTaken(command.externalKey);
  const invalid = validWindowError(command.validFrom, command.validTo);
  if (invalid) throw refuse.invalid([invalid]);
  // Tag events go on the new location's own stream, after its creation.
  const tags = attachTags({ orgId: command.orgId, ownerType: 'location', ownerId: command.locationId }, command.tags, command.at);
  return [
    {
      type: 'LocationCreated',
      data: {
        org_id: command.orgId,
        location_id: command.locationId,
        external_key: command.externalKey,
        name: command.name,
        description: command.description,
        parent_id: parent?.id ?? null,
        is_active: command.isActive,
        valid_from: iso(command.validFrom),
        valid_to: iso(command.validTo),
        at: command.at,
      },
    },
    ...tags,
  ];
}

/**
 * Where a PATCH moves the location: nowhere (undefined) when the body names no parent, names the
 * current one by id (accept-if-matches), or when a read-only field differs (the parent's check
 * comes after that step: a foreign key on PATCH); otherwise the parent it names, or its field
 * errors added to `errors`.
 */
function parentMove(parent: ParentLookup | null | undefined, state: LocationRecord, errors: FieldError[]): { parent: TreeNode | null } | undefined {
  const unchanged = parent === undefined || (parent !== null && parent.ref.field === 'parent_id' && parent.ref.id === state.parentId);
  if (unchanged || errors.length > 0) return undefined;
  if (parent === null) return { parent: null };
  const found = parentOf(parent);
  if (Array.isArray(found)) {
    errors.push(...found);
    return undefined;
  }
  return { parent: found };
}

/** The fields a PATCH changes (none that equal the state; timestamps by instant), their field errors added to `errors`. */
function fieldChanges(c: UpdateLocation['changes'], state: LocationRecord, errors: FieldError[]): LocationChanges {
  const changes: LocationChanges = {};
  if (c.name !== undefined && c.name !== state.name) changes.name = c.name;
  if (c.description !== undefined && c.description !== state.description) changes.description = c.description;
  if (c.isActive !== undefined && c.isActive !== state.isActive) changes.is_active = c.isActive;
  if (c.validFrom !== undefined && !sameInstant(state.validFrom, c.validFrom)) {
    // valid_from is not writable-nullable: null is only accepted as the value it already has.
    if (c.validFrom === null) errors.push(fieldErrors.invalidValue('valid_from', 'valid_from must not be null'));
    else changes.valid_from = iso(c.validFrom);
  }
  if (c.validTo !== undefined && !sameInstant(state.validTo, c.validTo)) changes.valid_to = iso(c.validTo);
  if (changes.valid_from !== undefined || changes.valid_to !== undefined) {
    const validFrom = changes.valid_from !== undefined ? changes.valid_from : state.validFrom;
    const validTo = changes.valid_to !== undefined ? changes.valid_to : state.validTo;
    const invalid = validWindowError(validFrom, validTo);
    if (invalid) errors.push(invalid);
  }
  return changes;
}

/** The events of an accepted PATCH: the field changes first, then the move (refused when it would make a cycle). */
function updateEvents(state: LocationRecord, changes: LocationChanges, move: { parent: TreeNode | null } | undefined, at: string): LocationEvent[] {
  const events: LocationEvent[] = [];
  if (Object.keys(changes).length > 0) events.push({ type: 'LocationUpdated', data: { org_id: state.orgId, location_id: state.id, changes, at } });
  const newParent = move?.parent;
  if (move && (newParent?.id ?? null) !== state.parentId) {
    if (newParent && (newParent.id === state.id || newParent.ancestors.includes(state.id))) {
      throw refuse.conflict(`Re-parenting under location ${newParent.id} would make location ${state.externalKey} (id ${state.id}) its own ancestor`);
    }
    events.push({
      type: 'LocationMoved',
      data: { org_id: state.orgId, location_id: state.id, parent_id: newParent?.id ?? null, previous_parent_id: state.parentId, at },
    });
  }
  return events;
}

function decideUpdate(command: UpdateLocation, state: LocationState): LocationEvent[] {
  // A parent named both ways, one of them null, names no location: refused before anything else.
  if (halfNamed(command.parent?.ref)) throw refuse.invalid(ambiguousParent());
  if (state.status !== 'existing') throw locationNotFound();
  // Every field error of the body at once (docs/api.md "Errors": all field errors at once), in view order.
  const errors = readOnlyErrors('locations', command.sent, readOnlyView(state, command.at));
  const move = parentMove(command.parent, state, errors);
  const changes = fieldChanges(command.changes, state, errors);
  if (errors.length > 0) throw refuse.invalid(orderFieldErrors(errors, LOCATION_FIELD_ORDER));
  return updateEvents(state, changes, move, command.at);
}

function decideRename(command: RenameLocation, state: LocationState): LocationEvent[] {
  if (state.status !== 'existing') throw locationNotFound();
  if (command.externalKey === state.externalKey) return [];
  if (command.keyTaken) throw keyTaken(command.externalKey);
  return [
    {
      type: 'LocationRenamed',
      data: { org_id: state.orgId, location_id: state.id, external_key: command.externalKey, previous_external_key: state.externalKey, at: command.at },
    },
  ];
}

function decideDelete(command: DeleteLocation, state: LocationState): LocationStreamEvent[] {
  if (state.status !== 'existing') throw locationNotFound();
  if (command.existingDescendants > 0) throw refuse.conflict(DESCENDANTS_BLOCK_DELETE);
  if (command.existingAssets > 0) throw refuse.conflict(ASSETS_BLOCK_DELETE);
  // Its existing tags are retired first, freeing their values.
  return [
    ...retireTags({ orgId: state.orgId, ownerType: 'location', ownerId: state.id }, state.tags, command.at),
    { type: 'LocationDeleted', data: { org_id: state.orgId, location_id: state.id, external_key: state.externalKey, at: command.at } },
  ];
}

/** docs/api.md, "Restoring": idempotent for an existing location; under an existing parent; its key free. */
function decideRestore(command: RestoreLocation, state: LocationState): LocationEvent[] {
  if (state.status === 'absent') throw locationNotFound();
  if (state.status === 'existing') return [];
  if (state.parentId !== null && !command.parentExists) throw refuse.conflict(parentDeleted(state.parentId, command.parentExternalKey));
  if (command.keyTaken) throw keyTaken(state.externalKey);
  return [
    {
      type: 'LocationRestored',
      data: { org_id: state.orgId, location_id: state.id, external_key: state.externalKey, parent_id: state.parentId, at: command.at },
    },
  ];
}

/** Throws a DomainRefusal or returns the events to append (none for a no-op). */
export function decide(command: LocationCommand, state: LocationState): LocationStreamEvent[] {
  switch (command.type) {
    case 'CreateLocation':
      return decideCreate(command, state);
    case 'UpdateLocation':
      return decideUpdate(command, state);
    case 'RenameLocation':
      return decideRename(command, state);
    case 'DeleteLocation':
      return decideDelete(command, state);
    case 'RestoreLocation':
      return decideRestore(command, state);
  }
}

export const locationDecider: Decider<LocationState, LocationCommand, LocationStreamEvent> = { initialState, evolve, decide };
