import { z } from 'zod';
import { ApiError, ValidationFailed, fieldErrors, type FieldError } from '../../shared/errors.js';
import { DomainRefusal } from '../../shared/domain/refusal.js';
import { validateBody } from '../../shared/http/validation.js';
import { assetColumns, locationColumns, parseTagsCell, restoreFormula } from '../../shared/export/columns.js';
import { readReservation } from '../../shared/domain/reservations.js';
import type { CommandPort } from '../../shared/domain/port.js';
import type { CommandOptions } from '../../shared/domain/command.js';
import { createAsset, mergeAsset } from '../../shared/domain/assets/commands.js';
import { createAssetSchema, patchAssetSchema } from '../../shared/domain/assets/schema.js';
import { ASSET_FIELD_ORDER, type AssetPatch } from '../../shared/domain/assets/decider.js';
import { assetStream } from '../../shared/domain/assets/events.js';
import { createInputOf, createLocation, updateLocation } from '../../shared/domain/locations/commands.js';
import { createLocationSchema, patchLocationSchema, LOCATION_FIELD_ORDER } from '../../shared/domain/locations/schema.js';
import { locationStream } from '../../shared/domain/locations/events.js';
import { tagBodySchema, type TagBody } from '../../shared/domain/tags/schema.js';
import { OVERSIZED_CELL, MAX_CELL_CHARS, type Cell } from './file.js';

/**
 * An import's rows (docs/api.md, "Import"): the columns a file may have, a row as the body of the
 * API command it is, and that command. Columns are the export's, matched without regard to case;
 * the read-only ones are accepted and ignored, since rows are matched by `external_key` and
 * parents by `parent_external_key` (so an export imports into another organization).
 */

export type ImportResource = 'assets' | 'locations';
export type RowOutcome = 'created' | 'updated' | 'unchanged';

export interface RowError {
  row: number;
  field: string;
  code: string;
  message: string;
}

const COLUMNS: Record<ImportResource, readonly string[]> = { assets: assetColumns, locations: locationColumns };
const WRITABLE: Record<ImportResource, ReadonlySet<string>> = {
  assets: new Set(['external_key', 'name', 'description', 'is_active', 'valid_from', 'valid_to', 'metadata', 'tags']),
  locations: new Set(['external_key', 'name', 'description', 'parent_external_key', 'is_active', 'valid_from', 'valid_to', 'tags']),
};
/**
 * The read-only column that is read all the same: a row whose `deleted_at` is not blank describes
 * a deleted record (an export with `include_deleted=true`) and is left alone (docs/api.md, "Import").
 */
const DELETED_AT = 'deleted_at';
/** Unknown columns named in the 400 at most (a file of ten thousand columns gets the first ones). */
const MAX_COLUMN_ERRORS = 20;

/** A file's columns, by position: the writable field each one is, or null for a read-only one. */
export type Columns = Array<string | null>;

/**
 * The header's columns, or the `400 validation_error` the contract gives at once: unknown and
 * repeated columns, and a file without `external_key`.
 */
export function columnsOf(resource: ImportResource, header: readonly string[]): Columns {
  const known = new Map(COLUMNS[resource].map((c) => [c.toLowerCase(), c]));
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  const columns: Columns = header.map((raw) => {
    const name = restoreFormula(raw).trim();
    const column = known.get(name.toLowerCase());
    if (!column) {
      errors.push(fieldErrors.unknownField(name));
      return null;
    }
    if (seen.has(column)) errors.push(fieldErrors.invalidValue(column, `column ${column} appears more than once`));
    seen.add(column);
    return WRITABLE[resource].has(column) || column === DELETED_AT ? column : null;
  });
  if (!seen.has('external_key')) errors.push(fieldErrors.required('external_key'));
  if (errors.length > 0) {
    const shown = errors.slice(0, MAX_COLUMN_ERRORS).map((e) =>
      e.code === 'unknown_field' ? { ...e, message: `unknown column ${JSON.stringify(e.field)}: the columns are ${COLUMNS[resource].join(', ')}` } : e.code === 'required' ? { ...e, message: 'the file has no external_key column' } : e,
    );
    throw new ValidationFailed(shown);
  }
  return columns;
}

/** A row as the import reads it: its key, the body's fields it gives (blank cells left out), its tags, and what its cells already got wrong. */
export interface RowInput {
  externalKey: string | null;
  parentKey: string | null;
  fields: Record<string, unknown>;
  tags: Array<{ tag_type: string; value: string }> | null;
  /** The row names a deleted record (its `deleted_at` is not blank): it is counted unchanged and never applied. */
  deleted: boolean;
  errors: FieldError[];
}

export function rowInput(columns: Columns, cells: readonly Cell[]): RowInput {
  const input: RowInput = { externalKey: null, parentKey: null, fields: {}, tags: null, deleted: false, errors: [] };
  if (cells.length > columns.length) input.errors.push({ field: 'row', code: 'invalid_value', message: `the row has ${cells.length} cells; the header has ${columns.length}` });
  columns.forEach((column, i) => {
    const cell = cells[i];
    if (column === null || cell === undefined || cell === '') return;
    if (cell === OVERSIZED_CELL) {
      input.errors.push(fieldErrors.tooLong(column, MAX_CELL_CHARS));
      return;
    }
    const text = restoreFormula(cell);
    if (text === '') return;
    switch (column) {
      case DELETED_AT:
        input.deleted = true;
        break;
      case 'external_key':
        input.externalKey = text;
        input.fields.external_key = text;
        break;
      case 'parent_external_key':
        input.parentKey = text;
        input.fields.parent_external_key = text;
        break;
      case 'is_active':
        if (/^(true|false)$/i.test(text)) input.fields.is_active = text.toLowerCase() === 'true';
        else input.errors.push(fieldErrors.invalidValue('is_active', 'is_active must be true or false'));
        break;
      case 'metadata':
        try {
          const value: unknown = JSON.parse(text);
          if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not an object');
          input.fields.metadata = value;
        } catch {
          input.errors.push(fieldErrors.invalidValue('metadata', 'metadata must be a JSON object'));
        }
        break;
      case 'tags': {
        // The export's form (docs/api.md, "Export"): `type:value|…`, with `\|` and `\\` inside values.
        const parsed = parseTagsCell(text);
        if ('error' in parsed) input.errors.push(fieldErrors.invalidValue('tags', parsed.error));
        else input.tags = parsed.tags;
        break;
      }
      default:
        input.fields[column] = text;
    }
  });
  if (input.externalKey === null && !input.errors.some((e) => e.field === 'external_key')) input.errors.push(fieldErrors.required('external_key'));
  return input;
}

/** A refusal of a row's command as the row's errors: the contract's field errors, or the refusal's message. */
export function rowErrorsOf(row: number, error: unknown, fallbackField: string): RowError[] | null {
  const fields = error instanceof ValidationFailed ? error.fields : error instanceof DomainRefusal && error.kind === 'invalid' ? error.fields : null;
  if (fields) return fields.map((f) => ({ row, field: f.field, code: f.code, message: f.message }));
  if (error instanceof DomainRefusal) return [{ row, field: error.field ?? fallbackField, code: error.kind, message: error.message }];
  if (error instanceof ApiError) return [{ row, field: fallbackField, code: error.type, message: error.message }];
  return null;
}

const tagListSchema = z.array(tagBodySchema);

function validTags(tags: RowInput['tags']): TagBody[] {
  if (!tags) return [];
  const checked = validateBody(z.strictObject({ tags: tagListSchema }), { tags });
  return checked.tags;
}

/** What a row's command did, and the stream of the item it names (to find its events again on a resume). */
export interface AppliedRow {
  outcome: RowOutcome;
  streamId: string;
}

/**
 * An asset row: a key no existing asset holds creates one (`POST /assets` with embedded tags); a key
 * one holds merge-patches it and attaches the tags it lacks (`mergeAsset`). Refusals throw.
 */
export async function applyAssetRow(ctx: CommandPort, orgId: number, input: RowInput, options: CommandOptions): Promise<AppliedRow> {
  if (input.errors.length > 0) throw new ValidationFailed(input.errors);
  const reservation = await readReservation(ctx.store, 'asset-key', orgId, input.externalKey!);
  if (!reservation.holder) {
    const body = validateBody(createAssetSchema, { ...input.fields, ...(input.tags ? { tags: input.tags } : {}) }, ASSET_FIELD_ORDER);
    const id = await createAsset(ctx, orgId, body, options);
    return { outcome: 'created', streamId: assetStream(orgId, id) };
  }
  const id = reservation.holder.ownerId;
  const patch = validateBody(patchAssetSchema, input.fields, ASSET_FIELD_ORDER) as AssetPatch;
  const changed = await mergeAsset(ctx, orgId, id, patch, validTags(input.tags), options);
  return { outcome: changed ? 'updated' : 'unchanged', streamId: assetStream(orgId, id) };
}

/** A location row, as an asset row; its parent named by `parent_external_key`. */
export async function applyLocationRow(ctx: CommandPort, orgId: number, input: RowInput): Promise<AppliedRow> {
  if (input.errors.length > 0) throw new ValidationFailed(input.errors);
  const reservation = await readReservation(ctx.store, 'location-key', orgId, input.externalKey!);
  if (!reservation.holder) {
    const body = validateBody(createLocationSchema, { ...input.fields, ...(input.tags ? { tags: input.tags } : {}) }, LOCATION_FIELD_ORDER);
    const id = await createLocation(ctx, orgId, createInputOf(body));
    return { outcome: 'created', streamId: locationStream(orgId, id) };
  }
  const id = reservation.holder.ownerId;
  const body = validateBody(patchLocationSchema, input.fields, LOCATION_FIELD_ORDER);
  const changed = await updateLocation(ctx, orgId, id, {
    changes: { name: body.name, description: body.description, isActive: body.is_active, validFrom: body.valid_from, validTo: body.valid_to },
    parent: body.parent,
    sent: body,
    tags: validTags(input.tags),
  });
  return { outcome: changed ? 'updated' : 'unchanged', streamId: locationStream(orgId, id) };
}

/**
 * The order a locations file is applied in: file order, except that a row waits for the row of
 * the same file that its `parent_external_key` names (parents first). Rows of a cycle are
 * returned apart, each to be refused.
 */
export function locationOrder(inputs: readonly RowInput[]): { order: number[]; cyclic: Set<number> } {
  const byKey = new Map<string, number>();
  inputs.forEach((input, i) => {
    // A deleted record's row is never applied, so no row waits for it.
    if (input.externalKey !== null && !input.deleted && !byKey.has(input.externalKey)) byKey.set(input.externalKey, i);
  });
  const state = new Uint8Array(inputs.length); // 0 new, 1 on the path, 2 placed
  const order: number[] = [];
  const cyclic = new Set<number>();
  for (let start = 0; start < inputs.length; start++) {
    if (state[start] !== 0) continue;
    // Walk up the parents of the same file, iteratively, then place them from the top down.
    const path: number[] = [];
    let at: number | undefined = start;
    while (at !== undefined && state[at] === 0) {
      state[at] = 1;
      path.push(at);
      const parent: string | null = inputs[at]!.parentKey;
      const next: number | undefined = parent === null ? undefined : byKey.get(parent);
      at = next === at ? undefined : next;
      if (next === path[path.length - 1] && next !== undefined) cyclic.add(next);
    }
    if (at !== undefined && state[at] === 1) {
      // A cycle: from `at` to the end of the path.
      for (let i = path.indexOf(at); i < path.length; i++) cyclic.add(path[i]!);
    }
    for (let i = path.length - 1; i >= 0; i--) {
      state[path[i]!] = 2;
      if (!cyclic.has(path[i]!)) order.push(path[i]!);
    }
  }
  // Rows below a cycle still come after it; their parent's create is refused, so they are refused too.
  return { order, cyclic };
}
