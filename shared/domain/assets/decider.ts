import type { EventData } from '../../event-store/port.js';
import { NotFoundError, ValidationFailed, fieldErrors, orderFieldErrors, type FieldError } from '../../errors.js';
import { isEffective } from '../fields.js';
import { READ_ONLY_MESSAGES, readOnlyErrors, sameJson, type ReadOnlyCheck } from '../patch.js';
import { decideRetireTags, evolveTags, tagAttachedEvent, type TagInput, type TagState } from '../tags/decider.js';
import {
  AssetCreated,
  AssetDeleted,
  AssetRenamed,
  AssetUpdated,
  type AssetChanges,
  type AssetCreatedData,
  type AssetDeletedData,
  type AssetRenamedData,
  type AssetUpdatedData,
} from './events.js';

/**
 * The asset decider: pure functions from (command, state) to events or a domain error.
 * Uniqueness of external_key and tag values spans streams; the command handlers claim those
 * reservations around these decisions.
 */

export interface AssetState {
  id: number;
  org_id: number;
  external_key: string;
  name: string;
  description: string | null;
  is_active: boolean;
  valid_from: string | null;
  valid_to: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  /** Live tags, in attach order. */
  tags: TagState[];
}

export const initialState: AssetState | null = null;

export function evolve(state: AssetState | null, event: { type: string; data: unknown }): AssetState | null {
  switch (event.type) {
    case AssetCreated.type: {
      const d = event.data as AssetCreatedData;
      return {
        id: d.asset_id,
        org_id: d.org_id,
        external_key: d.external_key,
        name: d.name,
        description: d.description,
        is_active: d.is_active,
        valid_from: d.valid_from,
        valid_to: d.valid_to,
        metadata: d.metadata,
        created_at: d.at,
        updated_at: d.at,
        deleted_at: null,
        tags: [],
      };
    }
    case AssetUpdated.type: {
      if (!state) return state;
      const d = event.data as AssetUpdatedData;
      return { ...state, ...d.changes, updated_at: d.at };
    }
    case AssetRenamed.type: {
      if (!state) return state;
      const d = event.data as AssetRenamedData;
      return { ...state, external_key: d.external_key, updated_at: d.at };
    }
    case AssetDeleted.type: {
      if (!state) return state;
      const d = event.data as AssetDeletedData;
      return { ...state, deleted_at: d.at, updated_at: d.at };
    }
    default:
      return state ? { ...state, tags: evolveTags(state.tags, event) } : state;
  }
}

export function fold(events: ReadonlyArray<{ type: string; data: unknown }>): AssetState | null {
  return events.reduce<AssetState | null>(evolve, initialState);
}

function requireLive(state: AssetState | null, assetId: number): AssetState {
  if (!state || state.deleted_at !== null) throw new NotFoundError(`Asset ${assetId} not found`);
  return state;
}

// ---- create ---------------------------------------------------------------------------------

export interface CreateAsset {
  orgId: number;
  assetId: number;
  externalKey: string;
  minted: boolean;
  name: string;
  description: string | null;
  isActive: boolean;
  validFrom: Date | null;
  validTo: Date | null;
  metadata: Record<string, unknown>;
  tags: Array<{ tagId: number; input: TagInput }>;
  at: string;
}

export function decideCreate(command: CreateAsset, state: AssetState | null): EventData[] {
  if (state !== null) throw new Error(`asset ${command.assetId} already exists`);
  const created: AssetCreatedData = {
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
  };
  const owner = { orgId: command.orgId, ownerType: 'asset' as const, ownerId: command.assetId };
  return [{ type: AssetCreated.type, data: created }, ...command.tags.map((t) => tagAttachedEvent(owner, t.tagId, t.input, command.at))];
}

// ---- update (merge patch) -------------------------------------------------------------------

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
  assetId: number;
  patch: AssetPatch;
  /** Scan data, from the read model: compared for accept-if-matches only. */
  currentLocation: { id: number | null; external_key: string | null };
  now: Date;
  at: string;
}

export const ASSET_FIELD_ORDER = [
  'id',
  'external_key',
  'name',
  'description',
  'location_id',
  'location_external_key',
  'is_active',
  'valid_from',
  'valid_to',
  'metadata',
  'created_at',
  'updated_at',
  'deleted_at',
  'tags',
] as const;

/** The embedded `tags` of the view: active, currently effective, in creation order. */
export function embeddedTagViews(tags: readonly TagState[], now: Date): TagState[] {
  return tags.filter(
    (t) => t.is_active && isEffective(t.valid_from ? new Date(t.valid_from) : null, t.valid_to ? new Date(t.valid_to) : null, now),
  );
}

const TAG_TIMESTAMPS = new Set(['valid_from', 'valid_to', 'created_at']);

function sameInstantOrNull(a: string | null, b: Date | null): boolean {
  if (a === null || b === null) return a === null && b === null;
  return new Date(a).getTime() === b.getTime();
}

function readOnlyChecks(state: AssetState, location: UpdateAsset['currentLocation'], now: Date): ReadOnlyCheck[] {
  return [
    { field: 'id', current: state.id, message: READ_ONLY_MESSAGES.serverManaged('id') },
    { field: 'external_key', current: state.external_key, message: READ_ONLY_MESSAGES.externalKey('assets') },
    { field: 'location_id', current: location.id, message: READ_ONLY_MESSAGES.location('location_id') },
    { field: 'location_external_key', current: location.external_key, message: READ_ONLY_MESSAGES.location('location_external_key') },
    { field: 'created_at', current: state.created_at, timestamp: true, message: READ_ONLY_MESSAGES.serverManaged('created_at') },
    { field: 'updated_at', current: state.updated_at, timestamp: true, message: READ_ONLY_MESSAGES.serverManaged('updated_at') },
    { field: 'deleted_at', current: state.deleted_at, timestamp: true, message: READ_ONLY_MESSAGES.serverManaged('deleted_at') },
    { field: 'tags', current: embeddedTagViews(state.tags, now), nestedTimestamps: TAG_TIMESTAMPS, message: READ_ONLY_MESSAGES.tags('assets') },
  ];
}

/**
 * The state-dependent errors of a raw PATCH body whose schema check failed (read-only fields
 * that differ, a null valid_from over a set one), so the caller gets every field error at once.
 * External keys that fail their own pattern are left to the schema's error.
 */
export function patchStateErrors(
  body: Record<string, unknown>,
  state: AssetState | null,
  currentLocation: UpdateAsset['currentLocation'],
  now: Date,
): FieldError[] {
  if (!state || state.deleted_at !== null) return [];
  const errors = readOnlyErrors(body, readOnlyChecks(state, currentLocation, now));
  if (body.valid_from === null && state.valid_from !== null) errors.push(fieldErrors.invalidValue('valid_from', 'valid_from must not be null'));
  return errors;
}

export function decideUpdate(command: UpdateAsset, stateIn: AssetState | null): EventData[] {
  const state = requireLive(stateIn, command.assetId);
  const patch = command.patch;
  const errors: FieldError[] = readOnlyErrors(patch as Record<string, unknown>, readOnlyChecks(state, command.currentLocation, command.now));

  const changes: AssetChanges = {};
  if (patch.name !== undefined && patch.name !== state.name) changes.name = patch.name;
  if (patch.description !== undefined && patch.description !== state.description) changes.description = patch.description;
  if (patch.is_active !== undefined && patch.is_active !== state.is_active) changes.is_active = patch.is_active;
  if (patch.valid_from !== undefined && !sameInstantOrNull(state.valid_from, patch.valid_from)) {
    // valid_from is not writable-nullable: null is accepted only when it is already null.
    if (patch.valid_from === null) errors.push(fieldErrors.invalidValue('valid_from', 'valid_from must not be null'));
    else changes.valid_from = patch.valid_from.toISOString();
  }
  if (patch.valid_to !== undefined && !sameInstantOrNull(state.valid_to, patch.valid_to)) {
    changes.valid_to = patch.valid_to === null ? null : patch.valid_to.toISOString();
  }
  if (patch.metadata !== undefined && !sameJson(patch.metadata, state.metadata)) changes.metadata = patch.metadata;

  const validFrom = changes.valid_from !== undefined ? changes.valid_from : state.valid_from;
  const validTo = changes.valid_to !== undefined ? changes.valid_to : state.valid_to;
  if (validFrom !== null && validTo !== null && new Date(validTo).getTime() <= new Date(validFrom).getTime()) {
    errors.push(fieldErrors.invalidValue('valid_to', 'valid_to must be later than valid_from'));
  }

  if (errors.length > 0) throw new ValidationFailed(orderFieldErrors(errors, ASSET_FIELD_ORDER));
  if (Object.keys(changes).length === 0) return [];
  const data: AssetUpdatedData = { org_id: state.org_id, asset_id: state.id, changes, at: command.at };
  return [{ type: AssetUpdated.type, data }];
}

// ---- rename ---------------------------------------------------------------------------------

export function decideRename(command: { assetId: number; externalKey: string; at: string }, stateIn: AssetState | null): EventData[] {
  const state = requireLive(stateIn, command.assetId);
  if (state.external_key === command.externalKey) return [];
  const data: AssetRenamedData = {
    org_id: state.org_id,
    asset_id: state.id,
    external_key: command.externalKey,
    previous_external_key: state.external_key,
    at: command.at,
  };
  return [{ type: AssetRenamed.type, data }];
}

// ---- delete ---------------------------------------------------------------------------------

/** Soft delete: retires the live tags first (freeing their values), then deletes the asset. */
export function decideDelete(command: { assetId: number; at: string }, stateIn: AssetState | null): EventData[] {
  const state = requireLive(stateIn, command.assetId);
  const owner = { orgId: state.org_id, ownerType: 'asset' as const, ownerId: state.id };
  const data: AssetDeletedData = { org_id: state.org_id, asset_id: state.id, external_key: state.external_key, at: command.at };
  return [...decideRetireTags(owner, state.tags, command.at), { type: AssetDeleted.type, data }];
}
