import { z } from 'zod';
import { description, externalKey, metadata, name, refineValidWindow, timestamp, viewFields } from '../fields.js';
import { READ_ONLY_MESSAGES, readOnlyField } from '../patch.js';
import { tagBodySchema, tagViewSchema } from '../tags/schema.js';

/** Request bodies and the view of the asset endpoints; the same schemas feed the OpenAPI document. */

/** Asset location is scan data: on POST it is refused whatever its value (one entry per field). */
function refusedOnCreate(field: 'location_id' | 'location_external_key') {
  return z
    .unknown()
    .superRefine((_value, ctx) => {
      ctx.addIssue({ code: 'custom', message: READ_ONLY_MESSAGES.location(field), params: { code: 'read_only' } });
    })
    .optional()
    .meta({ readOnly: true, description: 'Scan data: refused on create.' });
}

export const MAX_EMBEDDED_TAGS = 100;

export const createAssetSchema = z
  .strictObject({
    external_key: externalKey().optional(),
    name,
    description: description.nullable().optional(),
    is_active: z.boolean().optional(),
    valid_from: timestamp('valid_from').nullable().optional(),
    valid_to: timestamp('valid_to').nullable().optional(),
    metadata: metadata.optional(),
    tags: z.array(tagBodySchema).max(MAX_EMBEDDED_TAGS).optional(),
    location_id: refusedOnCreate('location_id'),
    location_external_key: refusedOnCreate('location_external_key'),
  })
  .superRefine(refineValidWindow);

export type CreateAssetBody = z.output<typeof createAssetSchema>;

// `readOnly` (JSON Schema: "attempts to modify the value are expected to be ignored or rejected")
// is the accept-if-matches rule: generators leave these out of requests, a round trip may send them.
const readOnly = (text: string) => readOnlyField.optional().meta({ readOnly: true, description: `Read-only: ${text}` });

/** Merge patch: writable fields, plus the view's read-only fields (accepted when they match). */
export const patchAssetSchema = z.strictObject({
  id: readOnly('accepted when it equals the current value'),
  external_key: externalKey().optional().meta({ readOnly: true, description: 'Read-only here: accepted when it matches; use rename.' }),
  name: name.optional(),
  description: description.nullable().optional(),
  location_id: readOnly('scan data; accepted when it matches'),
  location_external_key: readOnly('scan data; accepted when it matches'),
  is_active: z.boolean().optional(),
  valid_from: timestamp('valid_from').nullable().optional(),
  valid_to: timestamp('valid_to').nullable().optional(),
  metadata: metadata.optional(),
  created_at: readOnly('accepted when it names the same instant'),
  updated_at: readOnly('accepted when it names the same instant'),
  deleted_at: readOnly('accepted when it names the same instant'),
  tags: readOnly('accepted when it equals the embedded tags; use the /tags sub-resource'),
});

export type PatchAssetBody = z.output<typeof patchAssetSchema>;

export const renameSchema = z.strictObject({ external_key: externalKey() });

export const assetViewSchema = z.object({
  id: viewFields.id,
  external_key: viewFields.externalKey,
  name,
  description: description.nullable(),
  location_id: viewFields.id.nullable(),
  location_external_key: viewFields.externalKey.nullable(),
  is_active: z.boolean(),
  valid_from: viewFields.timestamp.nullable(),
  valid_to: viewFields.timestamp.nullable(),
  metadata: z.record(z.string(), z.unknown()),
  created_at: viewFields.timestamp,
  updated_at: viewFields.timestamp,
  deleted_at: viewFields.timestamp.nullable(),
  tags: z.array(tagViewSchema),
});

