import { z } from 'zod';
import { fieldErrors, type FieldError } from '../errors.js';
import { parseInstant } from '../time.js';

/**
 * Merge-patch (RFC 7396) helpers shared by PATCH /assets and PATCH /locations: the
 * accept-if-matches, reject-if-differs rule for read-only fields, with the messages the contract
 * asks for (docs/api.md "Changing a record: PATCH"), and value comparison where timestamps match by
 * instant.
 */

export const READ_ONLY_MESSAGES = {
  serverManaged: (field: string) =>
    `${field} is server-managed; submit the current value or omit it (use DELETE to soft-delete)`,
  tags: (resource: 'assets' | 'locations') =>
    `tags cannot be changed through PATCH; use the /${resource}/{id}/tags sub-resource endpoints`,
  externalKey: (resource: 'assets' | 'locations') =>
    `external_key cannot be changed through PATCH; use POST /${resource}/{id}/rename`,
  location: (field: string) =>
    `${field} is collected through scan-event ingestion (fixed-reader pipeline or handheld UI submission) and is not directly settable`,
} as const;

/** A read-only field in a PATCH body: any JSON value is accepted by the schema, then compared. */
export const readOnlyField = z.unknown();

/**
 * Equal timestamps, to the millisecond: both naming the same instant, or both null. The one
 * "same instant" of the code: `current` is a stored value (a timestamp or a Date), `sent` what a
 * request or command carries (RFC 3339 text, parsed strictly, or a Date; anything else differs).
 */
export function sameInstant(current: Date | string | null, sent: unknown): boolean {
  if (current === null) return sent === null;
  const currentMs = (current instanceof Date ? current : new Date(current)).getTime();
  if (sent instanceof Date) return sent.getTime() === currentMs;
  if (typeof sent !== 'string') return false;
  const parsed = parseInstant(sent);
  return parsed.ok && parsed.ms === currentMs;
}

/** Structural JSON equality; object key order does not matter. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => sameJson(v, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao);
  const bk = Object.keys(bo);
  return ak.length === bk.length && ak.every((k) => Object.prototype.hasOwnProperty.call(bo, k) && sameJson(ao[k], bo[k]));
}

/**
 * Compares a sent view fragment (e.g. an embedded tags array) to the current one, treating the
 * named keys as timestamps (match by instant) at any depth.
 */
export function sameView(current: unknown, sent: unknown, timestampKeys: ReadonlySet<string>): boolean {
  if (Array.isArray(current)) {
    return Array.isArray(sent) && sent.length === current.length && current.every((v, i) => sameView(v, sent[i], timestampKeys));
  }
  if (current !== null && typeof current === 'object') {
    if (sent === null || typeof sent !== 'object' || Array.isArray(sent)) return false;
    const c = current as Record<string, unknown>;
    const s = sent as Record<string, unknown>;
    const keys = Object.keys(c);
    if (Object.keys(s).length !== keys.length) return false;
    return keys.every((k) => {
      if (!Object.prototype.hasOwnProperty.call(s, k)) return false;
      if (timestampKeys.has(k)) return sameInstant(c[k] as string | null, s[k]);
      return sameView(c[k], s[k], timestampKeys);
    });
  }
  return sameJson(current, sent);
}

/** The fields a view has that PATCH does not write (each resource has some of them). */
export const READ_ONLY_FIELDS = ['id', 'external_key', 'location_id', 'location_external_key', 'created_at', 'updated_at', 'deleted_at', 'tags'] as const;
export type ReadOnlyField = (typeof READ_ONLY_FIELDS)[number];

/** A resource's read-only fields as its view shows them now: the values a PATCH may repeat. */
export type ReadOnlyView = Partial<Record<ReadOnlyField, unknown>>;

type PatchedResource = 'assets' | 'locations';

// Keys of the embedded tag view compared by instant.
const TAG_TIMESTAMPS: ReadonlySet<string> = new Set(['valid_from', 'valid_to', 'created_at']);
const atSameInstant = (current: unknown, sent: unknown) => sameInstant(current as string | null, sent);

/** How each read-only field compares, and the write path its message names (docs/api.md "Changing a record: PATCH"). */
const RULES: Record<ReadOnlyField, { same(current: unknown, sent: unknown): boolean; message(resource: PatchedResource): string }> = {
  id: { same: sameJson, message: () => READ_ONLY_MESSAGES.serverManaged('id') },
  external_key: { same: sameJson, message: (resource) => READ_ONLY_MESSAGES.externalKey(resource) },
  location_id: { same: sameJson, message: () => READ_ONLY_MESSAGES.location('location_id') },
  location_external_key: { same: sameJson, message: () => READ_ONLY_MESSAGES.location('location_external_key') },
  created_at: { same: atSameInstant, message: () => READ_ONLY_MESSAGES.serverManaged('created_at') },
  updated_at: { same: atSameInstant, message: () => READ_ONLY_MESSAGES.serverManaged('updated_at') },
  deleted_at: { same: atSameInstant, message: () => READ_ONLY_MESSAGES.serverManaged('deleted_at') },
  tags: { same: (current, sent) => sameView(current, sent, TAG_TIMESTAMPS), message: (resource) => READ_ONLY_MESSAGES.tags(resource) },
};

/**
 * The merge-patch read-only step, for every resource (docs/api.md "Changing a record:
 * PATCH"): each read-only field of the view that the body also sends is dropped
 * silently when it equals the current value (timestamps by instant, the embedded tags with their
 * timestamps by instant), and is a `read_only` error naming the proper write path when it differs.
 */
export function readOnlyErrors(resource: PatchedResource, body: Readonly<Record<string, unknown>>, current: ReadOnlyView): FieldError[] {
  const errors: FieldError[] = [];
  for (const field of READ_ONLY_FIELDS) {
    if (!Object.prototype.hasOwnProperty.call(current, field) || !Object.prototype.hasOwnProperty.call(body, field)) continue;
    const rule = RULES[field];
    if (!rule.same(current[field], body[field])) errors.push(fieldErrors.readOnly(field, rule.message(resource)));
  }
  return errors;
}
