import { z } from 'zod';
import { refineValidWindow, text, timestamp, viewFields } from '../fields.js';

/**
 * The tag body of `POST /assets/{id}/tags`, `POST /locations/{id}/tags` and of each entry of an
 * embedded `tags` array in a create body (docs/api.md "Tags").
 */

/** Known tag types. The list is open (clients tolerate new ones); the server accepts these. */
export const TAG_TYPES = ['rfid', 'ble', 'barcode'] as const;

/** A tag's type: one of TAG_TYPES (invalid_value with `params.allowed_values` otherwise). */
export const tagTypeField = z
  .string()
  .meta({ enum: [...TAG_TYPES], 'x-extensible-enum': true, description: 'Open list: clients tolerate new types.' })
  .superRefine((value, ctx) => {
    if (!(TAG_TYPES as readonly string[]).includes(value)) {
      ctx.addIssue({
        code: 'custom',
        message: `tag_type must be one of ${TAG_TYPES.join(', ')}`,
        params: { code: 'invalid_value', params: { allowed_values: [...TAG_TYPES] } },
      });
    }
  });

/** A tag's value: 1..255, no C0 controls except tab, newline and carriage return, no DEL. */
export const tagValueField = text('value', 255);

export const tagBodySchema = z
  .strictObject({
    tag_type: tagTypeField,
    value: tagValueField,
    is_active: z.boolean().optional(),
    valid_from: timestamp('valid_from').nullable().optional(),
    valid_to: timestamp('valid_to').nullable().optional(),
  })
  .superRefine(refineValidWindow);

export type TagBody = z.output<typeof tagBodySchema>;

/** The tag view (docs/api.md "Tags"): every field present, timestamps RFC 3339 UTC. */
export const tagViewSchema = z.object({
  id: viewFields.id,
  tag_type: z.string().meta({ enum: [...TAG_TYPES], 'x-extensible-enum': true }),
  value: tagValueField,
  is_active: z.boolean(),
  valid_from: viewFields.timestamp.nullable(),
  valid_to: viewFields.timestamp.nullable(),
  created_at: viewFields.timestamp,
});

export type TagView = z.infer<typeof tagViewSchema>;
