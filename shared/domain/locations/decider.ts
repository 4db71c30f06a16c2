import { ConflictError, NotFoundError, ValidationFailed, fieldErrors, orderFieldErrors, type FieldError } from '../../errors.js';
import type { Decider } from '../decider.js';
import { validWindowError } from '../fields.js';
import { readOnlyErrors } from '../patch.js';
import { attachTags, embeddedTagViews, evolveTags, retireTags, type TagRequest, type TagState } from '../tags/decider.js';
import type { TagEvent } from '../tags/events.js';
import type { LocationEvent } from './events.js';
import { LOCATION_FIELD_ORDER } from './schema.js';

/**
 * The location decider: pure `evolve` and `decide`, no I/O. A location's stream carries its own
 * events and its tags' events. Facts that live outside it (the parent a body names and its path,
 * live descendants, placed assets, whether a key or tag value is taken) are read by the command
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
  /** Live tags, in attach order. */
  tags: TagState[];
}

export type LocationState = { status: 'absent' } | ({ status: 'live' | 'deleted' } & LocationRecord);

export const initialState: LocationState = { status: 'absent' };

/** The events of a location's stream. */
export type LocationStreamEvent = LocationEvent | TagEvent;

export function evolve(state: LocationState, event: LocationStreamEvent): LocationState {
  switch (event.type) {
    case 'LocationCreated': {
      const d = event.data;
      return {
        status: 'live',
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
    case 'TagAttached':
    case 'TagDetached':
      if (state.status === 'absent') return state;
      return { ...state, tags: evolveTags(state.tags, event) };
  }
}


/** A live location of the same org, with its ancestor ids root first (itself excluded). */
export interface TreeNode {
  id: number;
  ancestors: readonly number[];
}

/** How a body names a parent: by id, by key, or (PATCH only) by both, which must agree. */
export type ParentRef =
  | { field: 'parent_id'; id: number }
  | { field: 'parent_external_key'; externalKey: string }
  | { field: 'both'; id: number; externalKey: string };

/** A parent the body names, and the live location the handler found for it (by key for `both`). */
export interface ParentLookup {
  ref: ParentRef;
  found: TreeNode | null;
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
  validFrom: string | null;
  validTo: string | null;
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
    validFrom?: string | null;
    validTo?: string | null;
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
  liveDescendants: number;
  liveAssets: number;
  at: string;
}

export type LocationCommand = CreateLocation | UpdateLocation | RenameLocation | DeleteLocation;

export const DESCENDANTS_BLOCK_DELETE =
  'location has descendant locations; reassign or remove them before deleting (cascade is not supported)';
export const ASSETS_BLOCK_DELETE =
  'location has assets placed at it; move or remove them before deleting (cascade is not supported)';

export function locationNotFound(): NotFoundError {
  return new NotFoundError('Location not found');
}

function keyTaken(key: string): ConflictError {
  return new ConflictError(`external_key "${key}" is already used by another location`);
}

/** The live location a parent reference names, or the contract's field errors for it. */
function parentOf({ ref, found }: ParentLookup): TreeNode | FieldError[] {
  if (ref.field === 'both') return found && found.id === ref.id ? found : fieldErrors.ambiguous(['parent_id', 'parent_external_key']);
  if (found) return found;
  return [
    fieldErrors.fkNotFound(
      ref.field,
      ref.field === 'parent_id' ? `parent_id ${ref.id} does not reference a live location` : `parent_external_key "${ref.externalKey}" does not reference a live location`,
    ),
  ];
}

/** The live location a parent reference names; throws the contract's error for it. */
function resolveParent(lookup: ParentLookup): TreeNode {
  const parent = parentOf(lookup);
  if (Array.isArray(parent)) throw new ValidationFailed(parent);
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
  if (state.status !== 'live') return [];
  const errors = readOnlyErrors('locations', body, readOnlyView(state, at));
  if (body.valid_from === null && state.validFrom !== null) errors.push(fieldErrors.invalidValue('valid_from', 'valid_from must not be null'));
  return errors;
}

/** Throws a domain error (ApiError) or returns the events to append (none for a no-op). */
export function decide(command: LocationCommand, state: LocationState): LocationStreamEvent[] {
  switch (command.type) {
    case 'CreateLocation': {
      if (state.status !== 'absent') throw new ConflictError(`Location ${command.locationId} already exists`);
      const parent = command.parent ? resolveParent(command.parent) : null;
      if (command.keyTaken) throw keyTaken(command.externalKey);
      const invalid = validWindowError(command.validFrom, command.validTo);
      if (invalid) throw new ValidationFailed([invalid]);
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
            valid_from: command.validFrom,
            valid_to: command.validTo,
            at: command.at,
          },
        },
        ...tags,
      ];
    }

    case 'UpdateLocation': {
      if (state.status !== 'live') throw locationNotFound();
      // Every field error of the body at once (docs/api.md "Errors": all field errors at once), in view order;
      // the parent's check runs after the read-only step (docs/api.md "Changing a record: PATCH"), so
      // only when no read-only field differs.
      const errors = readOnlyErrors('locations', command.sent, readOnlyView(state, command.at));
      const readOnlyDiffers = errors.length > 0;
      // Read-only fields that match are accepted first: the current parent, named by id, is accepted as it is.
      const p = command.parent;
      const unchanged = p === undefined || (p !== null && p.ref.field === 'parent_id' && p.ref.id === state.parentId);
      let move: { parent: TreeNode | null } | undefined;
      if (!unchanged && !readOnlyDiffers) {
        const parent = p === null ? null : parentOf(p);
        if (Array.isArray(parent)) errors.push(...parent);
        else move = { parent };
      }
      const c = command.changes;
      const changes: Extract<LocationEvent, { type: 'LocationUpdated' }>['data']['changes'] = {};
      if (c.name !== undefined && c.name !== state.name) changes.name = c.name;
      if (c.description !== undefined && c.description !== state.description) changes.description = c.description;
      if (c.isActive !== undefined && c.isActive !== state.isActive) changes.is_active = c.isActive;
      if (c.validFrom !== undefined && !sameInstant(c.validFrom, state.validFrom)) {
        // valid_from is not writable-nullable: null is only accepted as the value it already has.
        if (c.validFrom === null) errors.push(fieldErrors.invalidValue('valid_from', 'valid_from must not be null'));
        else changes.valid_from = c.validFrom;
      }
      if (c.validTo !== undefined && !sameInstant(c.validTo, state.validTo)) changes.valid_to = c.validTo;
      const validFrom = changes.valid_from !== undefined ? changes.valid_from : state.validFrom;
      const validTo = changes.valid_to !== undefined ? changes.valid_to : state.validTo;
      if (changes.valid_from !== undefined || changes.valid_to !== undefined) {
        const invalid = validWindowError(validFrom, validTo);
        if (invalid) errors.push(invalid);
      }
      if (errors.length > 0) throw new ValidationFailed(orderFieldErrors(errors, LOCATION_FIELD_ORDER));

      const events: LocationEvent[] = [];
      const newParent = move?.parent;
      if (move && (newParent?.id ?? null) !== state.parentId) {
        if (newParent && (newParent.id === state.id || newParent.ancestors.includes(state.id))) {
          throw new ConflictError(
            `Re-parenting under location ${newParent.id} would make location ${state.externalKey} (id ${state.id}) its own ancestor`,
          );
        }
        events.push({
          type: 'LocationMoved',
          data: { org_id: state.orgId, location_id: state.id, parent_id: newParent?.id ?? null, previous_parent_id: state.parentId, at: command.at },
        });
      }
      if (Object.keys(changes).length > 0) {
        events.unshift({ type: 'LocationUpdated', data: { org_id: state.orgId, location_id: state.id, changes, at: command.at } });
      }
      return events;
    }

    case 'RenameLocation': {
      if (state.status !== 'live') throw locationNotFound();
      if (command.externalKey === state.externalKey) return [];
      if (command.keyTaken) throw keyTaken(command.externalKey);
      return [
        {
          type: 'LocationRenamed',
          data: {
            org_id: state.orgId,
            location_id: state.id,
            external_key: command.externalKey,
            previous_external_key: state.externalKey,
            at: command.at,
          },
        },
      ];
    }

    case 'DeleteLocation': {
      if (state.status !== 'live') throw locationNotFound();
      if (command.liveDescendants > 0) throw new ConflictError(DESCENDANTS_BLOCK_DELETE);
      if (command.liveAssets > 0) throw new ConflictError(ASSETS_BLOCK_DELETE);
      // Its live tags are retired first, freeing their values.
      return [
        ...retireTags({ orgId: state.orgId, ownerType: 'location', ownerId: state.id }, state.tags, command.at),
        { type: 'LocationDeleted', data: { org_id: state.orgId, location_id: state.id, external_key: state.externalKey, at: command.at } },
      ];
    }
  }
}

function sameInstant(a: string | null, b: string | null): boolean {
  // Stryker disable next-line LogicalOperator,ConditionalExpression: equivalent, as Date.parse(null) is NaN, equal to nothing, so the guard only decides both-null, which `&&` or dropping either operand still answers true (line-wide: also skips this line's 4 killable ConditionalExpression mutants)
  if (a === null || b === null) return a === b;
  return Date.parse(a) === Date.parse(b);
}

export const locationDecider: Decider<LocationState, LocationCommand, LocationStreamEvent> = { initialState, evolve, decide };
