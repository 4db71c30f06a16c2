import { DomainRefusal, refuse } from '../refusal.js';
import { fieldErrors, orderFieldErrors, type FieldError } from '../../errors.js';
import type { Decider } from '../decider.js';
import { validWindowError } from '../fields.js';
import { readOnlyErrors, sameInstant, sameJson, type ReadOnlyView } from '../patch.js';
import type { AssetLocationRef } from '../read-model-queries.js';
import { attachTags, embeddedTagViews, evolveTags, retireTags, type TagRequest, type TagState } from '../tags/decider.js';
import type { TagEvent } from '../tags/events.js';
import type { AssetChanges, AssetEvent } from './events.js';
import { assetViewSchema } from './schema.js';

/**
 * The asset decider: pure `evolve` and `decide`, no I/O. An asset's stream carries its own events
 * and its tags' events. Facts from other streams and the read model (whether the key is taken,
 * who holds each tag value, the scan-derived location) are read by the command handler and passed
 * in on the command.
 */

export interface AssetRecord {
  id: number;
  orgId: number;
  externalKey: string;
  name: string;
  description: string | null;
  isActive: boolean;
  validFrom: string | null;
  validTo: string | null;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  deletedAt: string | null;
  /** Existing tags, in attach order. */
  tags: TagState[];
}

export type AssetState = { status: 'absent' } | ({ status: 'existing' | 'deleted' } & AssetRecord);

/** The events of an asset's stream. */
export type AssetStreamEvent = AssetEvent | TagEvent;

export const initialState: AssetState = { status: 'absent' };

/** An update's changes (as the event carries them) folded into the record. */
function changed(record: AssetRecord, c: AssetChanges): AssetRecord {
  return {
    ...record,
    ...(c.name !== undefined ? { name: c.name } : {}),
    ...(c.description !== undefined ? { description: c.description } : {}),
    ...(c.is_active !== undefined ? { isActive: c.is_active } : {}),
    ...(c.valid_from !== undefined ? { validFrom: c.valid_from } : {}),
    ...(c.valid_to !== undefined ? { validTo: c.valid_to } : {}),
    ...(c.metadata !== undefined ? { metadata: c.metadata } : {}),
  };
}

export function evolve(state: AssetState, event: AssetStreamEvent): AssetState {
  switch (event.type) {
    case 'AssetCreated': {
      const d = event.data;
      return {
        status: 'existing',
        id: d.asset_id,
        orgId: d.org_id,
        externalKey: d.external_key,
        name: d.name,
        description: d.description,
        isActive: d.is_active,
        validFrom: d.valid_from,
        validTo: d.valid_to,
        metadata: d.metadata,
        createdAt: d.at,
        updatedAt: d.at,
        deletedAt: null,
        tags: [],
      };
    }
    case 'AssetUpdated':
      if (state.status === 'absent') return state;
      return { ...state, ...changed(state, event.data.changes), updatedAt: event.data.at };
    case 'AssetRenamed':
      if (state.status === 'absent') return state;
      return { ...state, externalKey: event.data.external_key, updatedAt: event.data.at };
    case 'AssetDeleted':
      if (state.status === 'absent') return state;
      return { ...state, status: 'deleted', deletedAt: event.data.at, updatedAt: event.data.at };
    case 'AssetRestored':
      if (state.status === 'absent') return state;
      return { ...state, status: 'existing', deletedAt: null, updatedAt: event.data.at };
    case 'TagAttached':
    case 'TagDetached':
      if (state.status === 'absent') return state;
      return { ...state, tags: evolveTags(state.tags, event) };
  }
}

export interface CreateAsset {
  type: 'CreateAsset';
  orgId: number;
  assetId: number;
  externalKey: string;
  /** The key was auto-minted (absent from the body). */
  minted: boolean;
  /** Its reservation is held by another asset (a minted key never is: the handler skips those). */
  keyTaken: boolean;
  name: string;
  description: string | null;
  isActive: boolean;
  validFrom: Date | null;
  validTo: Date | null;
  metadata: Record<string, unknown>;
  /** Embedded tags, attached all-or-nothing with the create. */
  tags: readonly TagRequest[];
  at: string;
}

/** The decoded PATCH body: a key is present only when the body had it. */
export interface AssetPatch {
  name?: string;
  description?: string | null;
  is_active?: boolean;
  valid_from?: Date | null;
  valid_to?: Date | null;
  metadata?: Record<string, unknown>;
  id?: unknown;
  external_key?: unknown;
  location_id?: unknown;
  location_external_key?: unknown;
  created_at?: unknown;
  updated_at?: unknown;
  deleted_at?: unknown;
  tags?: unknown;
}

export interface UpdateAsset {
  type: 'UpdateAsset';
  assetId: number;
  patch: AssetPatch;
  /** Scan data, from the read model: compared for accept-if-matches only. */
  currentLocation: AssetLocationRef;
  at: string;
}

export interface RenameAsset {
  type: 'RenameAsset';
  assetId: number;
  externalKey: string;
  /** The new key's reservation is held (by another asset, or by this one when it is the same key). */
  keyTaken: boolean;
  at: string;
}

export interface DeleteAsset {
  type: 'DeleteAsset';
  assetId: number;
  at: string;
}

export interface RestoreAsset {
  type: 'RestoreAsset';
  assetId: number;
  /** The reservation of the asset's external_key is held (by another asset: its own was released with the delete). */
  keyTaken: boolean;
  at: string;
}

export type AssetCommand = CreateAsset | UpdateAsset | RenameAsset | DeleteAsset | RestoreAsset;

/** The view's fields in order: the order of field errors in a response. */
export const ASSET_FIELD_ORDER = Object.keys(assetViewSchema.shape);

function assetNotFound(assetId: number): DomainRefusal {
  return refuse.notFound(`Asset ${assetId} not found`);
}

function keyTaken(key: string): DomainRefusal {
  return refuse.conflict(`external_key "${key}" is already in use by another asset`);
}

/** The view's read-only fields as they stand (the scan-derived location from the read model). */
function readOnlyView(state: AssetRecord, location: AssetLocationRef, at: string): ReadOnlyView {
  return {
    id: state.id,
    external_key: state.externalKey,
    location_id: location.id,
    location_external_key: location.external_key,
    created_at: state.createdAt,
    updated_at: state.updatedAt,
    deleted_at: state.deletedAt,
    tags: embeddedTagViews(state.tags, new Date(at)),
  };
}

/**
 * The errors of a PATCH body that depend on the asset's state: read-only fields that differ, and
 * a null valid_from over a set one. `decide` reports them with the rest; for a raw body whose
 * schema check failed, the route reports them with the schema's, so the caller gets every field
 * error at once. External keys that fail their own pattern are left to the schema's error.
 */
export function patchStateErrors(body: Record<string, unknown>, state: AssetState, currentLocation: AssetLocationRef, at: string): FieldError[] {
  if (state.status !== 'existing') return [];
  const errors = readOnlyErrors('assets', body, readOnlyView(state, currentLocation, at));
  // valid_from is not writable-nullable: null is accepted only when it is already null.
  if (body.valid_from === null && state.validFrom !== null) errors.push(fieldErrors.invalidValue('valid_from', 'valid_from must not be null'));
  return errors;
}

export function decide(command: AssetCommand, state: AssetState): AssetStreamEvent[] {
  switch (command.type) {
    case 'CreateAsset': {
      if (state.status !== 'absent') throw refuse.conflict(`Asset ${command.assetId} already exists`);
      if (command.keyTaken) throw keyTaken(command.externalKey);
      const owner = { orgId: command.orgId, ownerType: 'asset' as const, ownerId: command.assetId };
      const tags = attachTags(owner, command.tags, command.at);
      return [
        {
          type: 'AssetCreated',
          data: {
            org_id: command.orgId,
            asset_id: command.assetId,
            external_key: command.externalKey,
            minted: command.minted,
            name: command.name,
            description: command.description,
            is_active: command.isActive,
            valid_from: command.validFrom ? command.validFrom.toISOString() : null,
            valid_to: command.validTo ? command.validTo.toISOString() : null,
            metadata: command.metadata,
            at: command.at,
          },
        },
        ...tags,
      ];
    }

    case 'UpdateAsset': {
      if (state.status !== 'existing') throw assetNotFound(command.assetId);
      const patch = command.patch;
      const errors = patchStateErrors(patch as Record<string, unknown>, state, command.currentLocation, command.at);
      const changes: AssetChanges = {};
      if (patch.name !== undefined && patch.name !== state.name) changes.name = patch.name;
      if (patch.description !== undefined && patch.description !== state.description) changes.description = patch.description;
      if (patch.is_active !== undefined && patch.is_active !== state.isActive) changes.is_active = patch.is_active;
      if (patch.valid_from && !sameInstant(state.validFrom, patch.valid_from)) changes.valid_from = patch.valid_from.toISOString();
      if (patch.valid_to !== undefined && !sameInstant(state.validTo, patch.valid_to)) {
        changes.valid_to = patch.valid_to === null ? null : patch.valid_to.toISOString();
      }
      if (patch.metadata !== undefined && !sameJson(patch.metadata, state.metadata)) changes.metadata = patch.metadata;

      const validFrom = changes.valid_from !== undefined ? changes.valid_from : state.validFrom;
      const validTo = changes.valid_to !== undefined ? changes.valid_to : state.validTo;
      const window = validWindowError(validFrom, validTo);
      if (window) errors.push(window);

      if (errors.length > 0) throw refuse.invalid(orderFieldErrors(errors, ASSET_FIELD_ORDER));
      if (Object.keys(changes).length === 0) return [];
      return [{ type: 'AssetUpdated', data: { org_id: state.orgId, asset_id: state.id, changes, at: command.at } }];
    }

    case 'RenameAsset': {
      if (state.status !== 'existing') throw assetNotFound(command.assetId);
      if (state.externalKey === command.externalKey) return [];
      if (command.keyTaken) throw keyTaken(command.externalKey);
      return [
        {
          type: 'AssetRenamed',
          data: {
            org_id: state.orgId,
            asset_id: state.id,
            external_key: command.externalKey,
            previous_external_key: state.externalKey,
            at: command.at,
          },
        },
      ];
    }

    case 'DeleteAsset': {
      // Soft delete: retires the existing tags first (freeing their values), then deletes the asset.
      if (state.status !== 'existing') throw assetNotFound(command.assetId);
      const owner = { orgId: state.orgId, ownerType: 'asset' as const, ownerId: state.id };
      return [
        ...retireTags(owner, state.tags, command.at),
        { type: 'AssetDeleted', data: { org_id: state.orgId, asset_id: state.id, external_key: state.externalKey, at: command.at } },
      ];
    }

    case 'RestoreAsset': {
      // docs/api.md, "Restoring": an existing asset is a no-op (idempotent); its key must be free.
      if (state.status === 'absent') throw assetNotFound(command.assetId);
      if (state.status === 'existing') return [];
      if (command.keyTaken) throw keyTaken(state.externalKey);
      return [{ type: 'AssetRestored', data: { org_id: state.orgId, asset_id: state.id, external_key: state.externalKey, at: command.at } }];
    }
  }
}

export const assetDecider: Decider<AssetState, AssetCommand, AssetStreamEvent> = { initialState, evolve, decide };
