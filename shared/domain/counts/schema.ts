import { z } from 'zod';
import { fieldErrors } from '../../errors.js';
import { bodyId, externalKey, name, viewFields } from '../fields.js';

/**
 * The count's body and views (docs/api.md "Counts"): the same schemas validate requests, type the
 * answers and feed the OpenAPI document. A body decodes its zone once, here, into one reference
 * (`zone`); the decider judges what it names.
 */

export const COUNT_STATUSES = ['open', 'closed'] as const;
export type CountStatus = (typeof COUNT_STATUSES)[number];

export const ITEM_STATUSES = ['found', 'missing', 'misplaced', 'unexpected'] as const;
export type ItemStatus = (typeof ITEM_STATUSES)[number];

/** How a body names the zone: by id or by key. */
export type ZoneRef = { field: 'location_id'; id: number } | { field: 'location_external_key'; externalKey: string };

export const COUNT_FIELD_ORDER = ['name', 'location_id', 'location_external_key'] as const;

export const startCountSchema = z
  .strictObject({
    name: name.optional(),
    location_id: bodyId.optional(),
    location_external_key: externalKey('location_external_key').optional(),
  })
  // The document states what the transform checks: the zone by exactly one of the two.
  .meta({
    oneOf: [
      { required: ['location_id'], properties: { location_id: { type: 'integer' } } },
      { required: ['location_external_key'], properties: { location_external_key: { type: 'string' } } },
    ],
  })
  .transform((body, ctx) => {
    // Runs once the rest of the body is valid, so a zone named twice or not at all is reported alone.
    if (body.location_id !== undefined && body.location_external_key !== undefined) {
      for (const error of fieldErrors.ambiguous(['location_id', 'location_external_key'])) {
        ctx.addIssue({ code: 'custom', path: [error.field], message: error.message, params: { code: error.code } });
      }
      return z.NEVER;
    }
    let zone: ZoneRef;
    if (body.location_id !== undefined) zone = { field: 'location_id', id: body.location_id };
    else if (body.location_external_key !== undefined) zone = { field: 'location_external_key', externalKey: body.location_external_key };
    else {
      ctx.addIssue({ code: 'custom', path: ['location_id'], message: 'location_id or location_external_key is required', params: { code: 'required' } });
      return z.NEVER;
    }
    return { name: body.name ?? null, zone };
  });

export type StartCountBody = z.output<typeof startCountSchema>;

const number = z.number().int().min(0);

export const countViewSchema = z.object({
  id: viewFields.id,
  name: z.string().nullable(),
  location_id: viewFields.id,
  location_external_key: viewFields.externalKey.nullable().meta({ description: "the zone's current key; null once that location is deleted" }),
  status: z.enum(COUNT_STATUSES),
  started_at: viewFields.timestamp,
  closed_at: viewFields.timestamp.nullable(),
  expected: number.meta({ description: 'assets whose current location was in the zone when the count started' }),
  found: number.meta({ description: 'expected and seen in the zone' }),
  missing: number.meta({ description: 'expected and not seen (yet, while open)' }),
  misplaced: number.meta({ description: 'expected and seen only outside the zone' }),
  unexpected: number.meta({ description: 'seen in the zone and not expected' }),
});

export type CountView = z.infer<typeof countViewSchema>;

export const countItemViewSchema = z.object({
  asset_id: viewFields.id,
  asset_external_key: viewFields.externalKey.nullable().meta({ description: "the asset's current key; null once it is deleted" }),
  status: z.enum(ITEM_STATUSES),
  seen_location_id: viewFields.id.nullable().meta({ description: 'found, unexpected: where its latest read in the zone was; misplaced: where its latest read was; missing: null' }),
  seen_location_external_key: viewFields.externalKey.nullable(),
  last_seen_at: viewFields.timestamp.nullable().meta({ description: 'observed time of that read; null when missing' }),
});

export type CountItemView = z.infer<typeof countItemViewSchema>;
