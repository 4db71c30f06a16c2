import { z } from 'zod';
import { bodyId, description, externalKey, name, timestamp, viewFields } from '../fields.js';
import { readOnlyField } from '../patch.js';
import { tagBodySchema, tagViewSchema } from '../tags/schema.js';
import { createParentOf, patchParentOf } from './parent.js';

/**
 * Request bodies and the view of the location endpoints; the same schemas validate requests,
 * type the read model's view and feed the OpenAPI document. A body decodes once, here: its
 * timestamps to Dates, and the parent it names to one reference (`parent`, parent.ts).
 */

export const createLocationSchema = z.strictObject({
  external_key: externalKey().optional(),
  name,
  description: description.nullable().optional(),
  parent_id: bodyId.nullable().optional(),
  parent_external_key: externalKey('parent_external_key').nullable().optional(),
  is_active: z.boolean().optional(),
  valid_from: timestamp('valid_from').nullable().optional(),
  valid_to: timestamp('valid_to').nullable().optional(),
  tags: z.array(tagBodySchema).optional(),
}).transform((body, ctx) => {
  // Runs once the rest of the body is valid, so an ambiguous parent is reported alone, as before.
  const parent = createParentOf(body);
  if (Array.isArray(parent)) {
    for (const error of parent) ctx.addIssue({ code: 'custom', path: [error.field], message: error.message, params: { code: error.code } });
    return z.NEVER;
  }
  return { ...body, parent };
});

export type CreateLocationBody = z.output<typeof createLocationSchema>;

// Locations have no metadata: a `metadata` key is an unknown field like any other.
export const patchLocationSchema = z.strictObject({
  id: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it equals the current value' }),
  external_key: externalKey().optional().meta({ readOnly: true, description: 'Read-only here: accepted when it matches; use rename.' }),
  name: name.optional(),
  description: description.nullable().optional(),
  parent_id: bodyId.nullable().optional(),
  parent_external_key: externalKey('parent_external_key').nullable().optional(),
  is_active: z.boolean().optional(),
  // Null is accepted by the schema and refused by the decider unless valid_from is already null.
  valid_from: timestamp('valid_from').nullable().optional(),
  valid_to: timestamp('valid_to').nullable().optional(),
  created_at: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it names the same instant' }),
  updated_at: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it names the same instant' }),
  deleted_at: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it names the same instant' }),
  tags: readOnlyField.optional().meta({ readOnly: true, description: 'Read-only: accepted when it equals the embedded tags; use the /tags sub-resource' }),
}).transform((body) => ({ ...body, parent: patchParentOf(body) }));

export type PatchLocationBody = z.output<typeof patchLocationSchema>;

export const renameLocationSchema = z.strictObject({ external_key: externalKey() });

/** The location view (docs/api.md "Locations"): every field present, in the contract's order. */
export const locationViewSchema = z.object({
  id: viewFields.id,
  external_key: viewFields.externalKey,
  name,
  description: description.nullable(),
  parent_id: viewFields.id.nullable(),
  parent_external_key: viewFields.externalKey.nullable(),
  is_active: z.boolean(),
  valid_from: viewFields.timestamp.nullable(),
  valid_to: viewFields.timestamp.nullable(),
  created_at: viewFields.timestamp,
  updated_at: viewFields.timestamp,
  deleted_at: viewFields.timestamp.nullable(),
  tags: z.array(tagViewSchema),
});

export type LocationView = z.infer<typeof locationViewSchema>;

/** The view's fields in order: the order of field errors in a response. */
export const LOCATION_FIELD_ORDER = Object.keys(locationViewSchema.shape) as ReadonlyArray<keyof LocationView>;
