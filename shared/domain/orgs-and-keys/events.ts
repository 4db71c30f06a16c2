import { z } from 'zod';
import { defineEvent, type EventOf } from '../../event-store/catalogue.js';
import { actorSchema } from '../actor.js';

/**
 * Organizations and API keys are master data: these events are their only source of truth.
 * Timestamps are ISO strings so a replay rebuilds identical rows. The token itself is never in an
 * event (it is a bearer secret); only its display prefix is.
 */

export const orgStream = (orgId: number) => `org-${orgId}`;
export const apiKeyStream = (keyId: string) => `apikey-${keyId}`;

export const OrgCreated = defineEvent(
  'OrgCreated',
  1,
  z.object({
    org_id: z.number().int().positive(),
    name: z.string().min(1).max(255),
    created_at: z.string(),
  }),
);

export const ApiKeyMinted = defineEvent(
  'ApiKeyMinted',
  1,
  z.object({
    key_id: z.string().min(1),
    org_id: z.number().int().positive(),
    name: z.string().min(1).max(255),
    scopes: z.array(z.string().min(1)),
    prefix: z.string().min(1),
    /** `kid` of the signing key that signed the token. */
    signing_kid: z.string().min(1),
    created_at: z.string(),
    expires_at: z.string().nullable(),
    /** Who minted it (absent in keys minted before this was recorded). */
    minted_by: actorSchema.optional(),
  }),
);

export const ApiKeyRevoked = defineEvent(
  'ApiKeyRevoked',
  1,
  z.object({
    key_id: z.string().min(1),
    org_id: z.number().int().positive(),
    revoked_at: z.string(),
    /** Who revoked it (absent in revocations before this was recorded). */
    revoked_by: actorSchema.optional(),
  }),
);

export type OrgCreatedData = z.output<typeof OrgCreated.schema>;
export type ApiKeyMintedData = z.output<typeof ApiKeyMinted.schema>;
export type ApiKeyRevokedData = z.output<typeof ApiKeyRevoked.schema>;

export const orgEvents = [OrgCreated] as const;
export const apiKeyEvents = [ApiKeyMinted, ApiKeyRevoked] as const;
export const authEvents = [...orgEvents, ...apiKeyEvents];

export type OrgEvent = EventOf<(typeof orgEvents)[number]>;
export type ApiKeyEvent = EventOf<(typeof apiKeyEvents)[number]>;
