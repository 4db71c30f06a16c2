import { z } from 'zod';
import { fieldErrors, type FieldError } from '../errors.js';
import { parseTimestamp } from '../http/validation.js';

/**
 * Merge-patch (RFC 7396) helpers shared by PATCH /assets and PATCH /locations: the
 * accept-if-matches, reject-if-differs rule for read-only fields, with the messages the spec
 * asks for, and value comparison where timestamps match by instant.
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

/** Equal timestamps: both RFC 3339 (or Date) naming the same instant, or both null. */
export function sameInstant(current: Date | string | null, sent: unknown): boolean {
  if (current === null) return sent === null;
  if (typeof sent !== 'string') return false;
  const parsed = parseTimestamp(sent);
  const currentMs = (current instanceof Date ? current : new Date(current)).getTime();
  return parsed !== null && parsed.getTime() === currentMs;
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

export interface ReadOnlyCheck {
  field: string;
  current: unknown;
  /** Compare by instant (a timestamp field). */
  timestamp?: boolean;
  /** Keys inside `current` compared by instant (for nested views such as tags). */
  nestedTimestamps?: ReadonlySet<string>;
  message: string;
}

/**
 * Accept-if-matches, reject-if-differs: for every check whose field is present in `body`,
 * a value equal to the current one is dropped silently; a differing one is a `read_only` error.
 */
export function readOnlyErrors(body: Record<string, unknown>, checks: readonly ReadOnlyCheck[]): FieldError[] {
  const errors: FieldError[] = [];
  for (const check of checks) {
    if (!Object.prototype.hasOwnProperty.call(body, check.field)) continue;
    const sent = body[check.field];
    const same = check.timestamp
      ? sameInstant(check.current as Date | string | null, sent)
      : check.nestedTimestamps
        ? sameView(check.current, sent, check.nestedTimestamps)
        : sameJson(check.current, sent);
    if (!same) errors.push(fieldErrors.readOnly(check.field, check.message));
  }
  return errors;
}

