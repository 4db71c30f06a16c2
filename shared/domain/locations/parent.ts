import { fieldErrors, type FieldError } from '../../errors.js';

/**
 * The parent rule of locations, in one place (docs/api.md, "Locations"): how a body names a
 * parent (decoded once, by the body's schema), and which existing location that names, or the
 * contract's field errors. The handler only looks the reference up (`lookupBy`); the decider
 * judges the lookup (`parentOf`) and the cycle.
 */

/** How a body names a parent: by id, by key, or (PATCH only) by both, which must name one location. */
export type ParentRef =
  | { field: 'parent_id'; id: number }
  | { field: 'parent_external_key'; externalKey: string }
  /** A null beside a value names no location: refused as ambiguous. */
  | { field: 'both'; id: number | null; externalKey: string | null };

/** The parent fields of a body as the schema checked them. */
export interface ParentFields {
  parent_id?: number | null;
  parent_external_key?: string | null;
}

/** An existing location of the same org, with its ancestor ids root first (itself excluded). */
export interface TreeNode {
  id: number;
  ancestors: readonly number[];
}

/** A parent the body names, and the existing location the handler found for it (by key for `both`). */
export interface ParentLookup {
  ref: ParentRef;
  found: TreeNode | null;
}

/** Both forms that do not name one location: one entry each. */
export function ambiguousParent(): FieldError[] {
  return fieldErrors.ambiguous(['parent_id', 'parent_external_key']);
}

function has(body: object, key: keyof ParentFields): boolean {
  return Object.prototype.hasOwnProperty.call(body, key);
}

/**
 * The parent a create names: none (null) or one form. Naming both forms, even as null, is
 * ambiguous: the field errors, which the schema reports once the rest of the body is valid.
 */
export function createParentOf(body: ParentFields): ParentRef | null | FieldError[] {
  if (has(body, 'parent_id') && has(body, 'parent_external_key')) return ambiguousParent();
  if (body.parent_id != null) return { field: 'parent_id', id: body.parent_id };
  if (body.parent_external_key != null) return { field: 'parent_external_key', externalKey: body.parent_external_key };
  return null;
}

/** The parent a PATCH names: absent (undefined: no change), null (detach to the root), or a reference. */
export function patchParentOf(body: ParentFields): ParentRef | null | undefined {
  const id = body.parent_id;
  const externalKey = body.parent_external_key;
  if (has(body, 'parent_id') && has(body, 'parent_external_key')) {
    return id === null && externalKey === null ? null : { field: 'both', id: id ?? null, externalKey: externalKey ?? null };
  }
  if (has(body, 'parent_id')) return id === null || id === undefined ? null : { field: 'parent_id', id };
  if (has(body, 'parent_external_key')) return externalKey === null || externalKey === undefined ? null : { field: 'parent_external_key', externalKey };
  return undefined;
}

/** Both forms, one of them null: no location to look up, refused before anything else. */
export function halfNamed(ref: ParentRef | null | undefined): boolean {
  return ref?.field === 'both' && (ref.id === null || ref.externalKey === null);
}

/** What the handler looks the reference up by (`both`: its key); null: nothing to look up. */
export function lookupBy(ref: ParentRef): { id: number } | { externalKey: string } | null {
  if (ref.field === 'parent_id') return { id: ref.id };
  return ref.externalKey === null ? null : { externalKey: ref.externalKey };
}

/** The existing location a parent reference names, or the contract's field errors for it. */
export function parentOf({ ref, found }: ParentLookup): TreeNode | FieldError[] {
  if (ref.field === 'both') return found && ref.id !== null && found.id === ref.id ? found : ambiguousParent();
  if (found) return found;
  return [
    fieldErrors.fkNotFound(
      ref.field,
      ref.field === 'parent_id' ? `parent_id ${ref.id} does not reference a live location` : `parent_external_key "${ref.externalKey}" does not reference a live location`,
    ),
  ];
}
