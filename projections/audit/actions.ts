import type { z } from 'zod';
import type { EventDefinition } from '../../shared/event-store/catalogue.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { CommandActor } from '../../shared/event-store/command-context.js';
import type { Actor } from '../../shared/domain/actor.js';
import { AssetCreated, AssetDeleted, AssetRenamed, AssetRestored, AssetUpdated } from '../../shared/domain/assets/events.js';
import { LocationCreated, LocationDeleted, LocationMoved, LocationRenamed, LocationRestored, LocationTreeChanged, LocationUpdated } from '../../shared/domain/locations/events.js';
import { TagAttached, TagDetached } from '../../shared/domain/tags/events.js';
import { ApiKeyMinted, ApiKeyRevoked, OrgCreated } from '../../shared/domain/orgs-and-keys/events.js';
import {
  InvitationAccepted,
  InvitationCancelled,
  InvitationIssued,
  MembershipGranted,
  MembershipRemoved,
  MembershipRoleChanged,
  PasswordSet,
  PasswordSetupIssued,
  UserCreated,
  UserEmailClaimed,
  currentMemberRole,
} from '../../shared/domain/people/events.js';
import { ReaderRegistered, ScanPointAssigned, ScanPointUnassigned } from '../../shared/domain/readers/events.js';
import { HandheldSubmissionReceived, ReaderMessageDeadLettered, ScanPlacementClosed, ScanPlacementReopened, ScansRecorded } from '../../shared/domain/scans/events.js';
import { UniqueValueClaimed, UniqueValueReleased } from '../../shared/domain/reservations.js';
import { AlertAcknowledged, AlertClockTicked, AlertRuleCreated, AlertRuleDeleted, AlertRuleUpdated } from '../../shared/domain/alerts/events.js';
import { CountClosed, CountStarted } from '../../shared/domain/counts/events.js';
import { WebhookEndpointCreated, WebhookEndpointDeleted, WebhookEndpointSecretRotated, WebhookEndpointUpdated } from '../../shared/domain/webhook-endpoints/events.js';

/**
 * What each event of a command says in the audit log (docs/api.md "Audit log"): one action per
 * event type, on one resource. A pure mapping of one event; the projection (./projection.ts) adds
 * what needs the state before it (the `from` of an update's changes, the organizations a person's
 * own event is listed in) from its own tables.
 */

/** Resource types of the audit log: those of docs/api.md, of which some have no events yet (imports, counts). */
export const RESOURCE_TYPES = [
  'asset',
  'location',
  'tag',
  'api_key',
  'user',
  'membership',
  'reader',
  'scan_point',
  'webhook_endpoint',
  'alert_rule',
  'alert',
  'import',
  'count',
  'organization',
] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

/**
 * How the resource's state (kept by the projection, for the `from` of updates) changes:
 * `set` replaces it (a create), `merge` changes these fields (an update: the row's `changes` are
 * these fields from their values before, when there was a state before), `forget` drops it.
 */
export type StateChange = { kind: 'set'; fields: Record<string, unknown> } | { kind: 'merge'; fields: Record<string, unknown> } | { kind: 'forget' };

export interface AuditFact {
  action: string;
  resourceType: ResourceType;
  resourceId: string;
  /**
   * The organization whose log lists it; `{ user }` for a person's own event (their account, which
   * belongs to no organization): listed in each organization the person is a member of.
   */
  listedIn: { orgId: number } | { user: string };
  occurredAt: string;
  /** The external key the event names; undefined: the one the state holds (assets and locations only). */
  externalKey?: string | null;
  /**
   * Who the event's data names as having done it, for events appended before metadata recorded
   * it (and for links followed by nobody signed in). A user's name null: their email as the
   * projection knows it.
   */
  dataActor: CommandActor | null;
  state?: StateChange;
  /** A membership granted: the person's own events waiting for their first organization go there. */
  joins?: { user: string; orgId: number };
}

/** The domain's actor, as the data of some events names it (`minted_by`, `created_by`...). */
export function actorOfData(actor: Actor | undefined): CommandActor | null {
  if (!actor) return null;
  return actor.kind === 'user' ? { type: 'user', id: actor.user_id, name: actor.email } : { type: 'cli', id: null, name: 'cli' };
}

const self = (userId: string): CommandActor => ({ type: 'user', id: userId, name: null });

type Mapping<D extends EventDefinition> = [D, (data: z.output<D['readSchema']>, event: RecordedEvent) => AuditFact | null];
const on = <D extends EventDefinition>(definition: D, map: Mapping<D>[1]): Mapping<EventDefinition> => [definition, map as Mapping<EventDefinition>[1]];

const assetFields = (d: z.output<typeof AssetCreated.schema>) => ({
  external_key: d.external_key,
  name: d.name,
  description: d.description,
  is_active: d.is_active,
  valid_from: d.valid_from,
  valid_to: d.valid_to,
  metadata: d.metadata,
});

const locationFields = (d: z.output<typeof LocationCreated.schema>) => ({
  external_key: d.external_key,
  name: d.name,
  description: d.description,
  is_active: d.is_active,
  valid_from: d.valid_from,
  valid_to: d.valid_to,
  parent_id: d.parent_id,
});

const scanPointId = (readerId: string, capturePoint: string) => `${readerId}/${capturePoint}`;

/** Every event type a command appends that the audit log lists, with its action. */
const MAPPINGS: Array<Mapping<EventDefinition>> = [
  on(AssetCreated, (d) => ({ action: 'asset.created', resourceType: 'asset', resourceId: String(d.asset_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, dataActor: null, state: { kind: 'set', fields: assetFields(d) } })),
  on(AssetUpdated, (d) => ({ action: 'asset.updated', resourceType: 'asset', resourceId: String(d.asset_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, dataActor: null, state: { kind: 'merge', fields: d.changes } })),
  on(AssetRenamed, (d) => ({
    action: 'asset.renamed',
    resourceType: 'asset',
    resourceId: String(d.asset_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    dataActor: null,
    state: { kind: 'merge', fields: { external_key: d.external_key } },
  })),
  on(AssetDeleted, (d) => ({ action: 'asset.deleted', resourceType: 'asset', resourceId: String(d.asset_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, externalKey: d.external_key, dataActor: null })),
  on(AssetRestored, (d) => ({ action: 'asset.restored', resourceType: 'asset', resourceId: String(d.asset_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, externalKey: d.external_key, dataActor: null })),

  on(LocationCreated, (d) => ({ action: 'location.created', resourceType: 'location', resourceId: String(d.location_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, dataActor: null, state: { kind: 'set', fields: locationFields(d) } })),
  on(LocationUpdated, (d) => ({ action: 'location.updated', resourceType: 'location', resourceId: String(d.location_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, dataActor: null, state: { kind: 'merge', fields: d.changes } })),
  on(LocationMoved, (d) => ({
    action: 'location.moved',
    resourceType: 'location',
    resourceId: String(d.location_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    dataActor: null,
    state: { kind: 'merge', fields: { parent_id: d.parent_id } },
  })),
  on(LocationRenamed, (d) => ({
    action: 'location.renamed',
    resourceType: 'location',
    resourceId: String(d.location_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    dataActor: null,
    state: { kind: 'merge', fields: { external_key: d.external_key } },
  })),
  on(LocationDeleted, (d) => ({ action: 'location.deleted', resourceType: 'location', resourceId: String(d.location_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, externalKey: d.external_key, dataActor: null })),
  on(LocationRestored, (d) => ({ action: 'location.restored', resourceType: 'location', resourceId: String(d.location_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, externalKey: d.external_key, dataActor: null })),

  on(TagAttached, (d) => ({ action: 'tag.attached', resourceType: 'tag', resourceId: String(d.tag_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, externalKey: null, dataActor: null })),
  // A tag retired with its deleted owner is part of that delete (asset.deleted, location.deleted), no command of its own.
  on(TagDetached, (d) =>
    d.reason === 'owner_deleted' ? null : { action: 'tag.detached', resourceType: 'tag', resourceId: String(d.tag_id), listedIn: { orgId: d.org_id }, occurredAt: d.at, externalKey: null, dataActor: null },
  ),

  on(OrgCreated, (d) => ({ action: 'organization.created', resourceType: 'organization', resourceId: String(d.org_id), listedIn: { orgId: d.org_id }, occurredAt: d.created_at, externalKey: null, dataActor: null })),
  on(ApiKeyMinted, (d) => ({ action: 'api_key.minted', resourceType: 'api_key', resourceId: d.key_id, listedIn: { orgId: d.org_id }, occurredAt: d.created_at, externalKey: null, dataActor: actorOfData(d.minted_by) })),
  on(ApiKeyRevoked, (d) => ({ action: 'api_key.revoked', resourceType: 'api_key', resourceId: d.key_id, listedIn: { orgId: d.org_id }, occurredAt: d.revoked_at, externalKey: null, dataActor: actorOfData(d.revoked_by) })),

  on(UserCreated, (d) => ({
    action: 'user.created',
    resourceType: 'user',
    resourceId: d.user_id,
    listedIn: { user: d.user_id },
    occurredAt: d.created_at,
    externalKey: null,
    dataActor: actorOfData(d.created_by),
    state: { kind: 'set', fields: { email: d.email } },
  })),
  // Version 1 named nobody (it came with users create, whose UserCreated names who asked).
  on(PasswordSetupIssued, (d) => ({
    action: 'user.setup_link_issued',
    resourceType: 'user',
    resourceId: d.user_id,
    listedIn: { user: d.user_id },
    occurredAt: d.issued_at,
    externalKey: null,
    dataActor: 'issued_by' in d ? actorOfData(d.issued_by) : null,
  })),
  // Whatever the way (a setup link, an invitation, a change), only the person sets their password.
  on(PasswordSet, (d) => ({ action: 'user.password_set', resourceType: 'user', resourceId: d.user_id, listedIn: { user: d.user_id }, occurredAt: d.set_at, externalKey: null, dataActor: self(d.user_id) })),
  on(MembershipGranted, (d) => ({
    action: 'membership.granted',
    resourceType: 'membership',
    resourceId: d.user_id,
    listedIn: { orgId: d.org_id },
    occurredAt: d.granted_at,
    externalKey: null,
    dataActor: actorOfData(d.granted_by),
    state: { kind: 'set', fields: { role: currentMemberRole(d.role) } },
    joins: { user: d.user_id, orgId: d.org_id },
  })),
  on(MembershipRoleChanged, (d) => ({
    action: 'membership.role_changed',
    resourceType: 'membership',
    resourceId: d.user_id,
    listedIn: { orgId: d.org_id },
    occurredAt: d.changed_at,
    externalKey: null,
    dataActor: actorOfData(d.changed_by),
    state: { kind: 'merge', fields: { role: currentMemberRole(d.role) } },
  })),
  on(MembershipRemoved, (d) => ({
    action: 'membership.removed',
    resourceType: 'membership',
    resourceId: d.user_id,
    listedIn: { orgId: d.org_id },
    occurredAt: d.removed_at,
    externalKey: null,
    dataActor: actorOfData(d.removed_by),
    state: { kind: 'forget' },
  })),
  // Invitations are memberships offered: their resource id is the invitation's.
  on(InvitationIssued, (d) => ({ action: 'membership.invited', resourceType: 'membership', resourceId: d.invitation_id, listedIn: { orgId: d.org_id }, occurredAt: d.issued_at, externalKey: null, dataActor: actorOfData(d.issued_by) })),
  on(InvitationAccepted, (d) => ({ action: 'membership.invitation_accepted', resourceType: 'membership', resourceId: d.invitation_id, listedIn: { orgId: d.org_id }, occurredAt: d.accepted_at, externalKey: null, dataActor: self(d.user_id) })),
  on(InvitationCancelled, (d) => ({
    action: 'membership.invitation_cancelled',
    resourceType: 'membership',
    resourceId: d.invitation_id,
    listedIn: { orgId: d.org_id },
    occurredAt: d.cancelled_at,
    externalKey: null,
    dataActor: actorOfData(d.cancelled_by),
  })),

  on(ReaderRegistered, (d) => ({ action: 'reader.registered', resourceType: 'reader', resourceId: d.reader_id, listedIn: { orgId: d.org_id }, occurredAt: d.at, externalKey: null, dataActor: null })),
  on(ScanPointAssigned, (d) => ({
    action: 'scan_point.assigned',
    resourceType: 'scan_point',
    resourceId: scanPointId(d.reader_id, d.capture_point),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    // A point assigned again, to another location: its changes say from where.
    state: { kind: 'merge', fields: { location_id: d.location_id } },
  })),
  on(ScanPointUnassigned, (d) => ({
    action: 'scan_point.unassigned',
    resourceType: 'scan_point',
    resourceId: scanPointId(d.reader_id, d.capture_point),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: { kind: 'forget' },
  })),

  // An endpoint's secret is in no event and no entry: a rotation says only that it happened.
  on(WebhookEndpointCreated, (d) => ({
    action: 'webhook_endpoint.created',
    resourceType: 'webhook_endpoint',
    resourceId: String(d.endpoint_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: {
      kind: 'set',
      fields: { url: d.url, description: d.description, event_types: d.event_types, is_active: d.imported?.is_active ?? true, not_seen_after_seconds: d.not_seen_after_seconds },
    },
  })),
  on(WebhookEndpointUpdated, (d) => ({
    action: 'webhook_endpoint.updated',
    resourceType: 'webhook_endpoint',
    resourceId: String(d.endpoint_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: { kind: 'merge', fields: d.changes },
  })),
  on(WebhookEndpointDeleted, (d) => ({
    action: 'webhook_endpoint.deleted',
    resourceType: 'webhook_endpoint',
    resourceId: String(d.endpoint_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: { kind: 'forget' },
  })),
  on(WebhookEndpointSecretRotated, (d) => ({
    action: 'webhook_endpoint.secret_rotated',
    resourceType: 'webhook_endpoint',
    resourceId: String(d.endpoint_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
  })),

  on(AlertRuleCreated, (d) => ({
    action: 'alert_rule.created',
    resourceType: 'alert_rule',
    resourceId: String(d.rule_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: {
      kind: 'set',
      fields: { name: d.name, kind: d.kind, location_id: d.location_id, threshold_seconds: d.threshold_seconds, asset_ids: d.asset_ids, is_active: d.is_active },
    },
  })),
  on(AlertRuleUpdated, (d) => ({
    action: 'alert_rule.updated',
    resourceType: 'alert_rule',
    resourceId: String(d.rule_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: { kind: 'merge', fields: d.changes },
  })),
  on(AlertRuleDeleted, (d) => ({
    action: 'alert_rule.deleted',
    resourceType: 'alert_rule',
    resourceId: String(d.rule_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: { kind: 'forget' },
  })),
  on(AlertAcknowledged, (d) => ({
    action: 'alert.acknowledged',
    resourceType: 'alert',
    resourceId: d.alert_id,
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
  })),
  on(CountStarted, (d) => ({
    action: 'count.started',
    resourceType: 'count',
    resourceId: String(d.count_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
    state: { kind: 'set', fields: { name: d.name, location_id: d.location_id } },
  })),
  on(CountClosed, (d) => ({
    action: 'count.closed',
    resourceType: 'count',
    resourceId: String(d.count_id),
    listedIn: { orgId: d.org_id },
    occurredAt: d.at,
    externalKey: null,
    dataActor: null,
  })),
];

/**
 * Event types that are no entry of the audit log, and why: scans (not commands), and the events a
 * command appends beside its own to keep a rule (reservations, the tree's lock, an email's claim,
 * a location's scans closed with its delete), which that command's entry already stands for.
 */
export const NOT_AUDITED: ReadonlyMap<string, string> = new Map([
  [ScansRecorded.type, 'scans are not commands'],
  [HandheldSubmissionReceived.type, 'scans are not commands'],
  [ReaderMessageDeadLettered.type, 'scans are not commands'],
  [ScanPlacementClosed.type, 'part of location.deleted'],
  [ScanPlacementReopened.type, 'part of location.restored'],
  [UniqueValueClaimed.type, 'a reservation, part of the command that claims the value'],
  [UniqueValueReleased.type, 'a reservation, part of the command that releases the value'],
  [LocationTreeChanged.type, "the location tree's lock, part of location.created, location.moved, location.deleted or location.restored"],
  [UserEmailClaimed.type, 'part of user.created'],
  [AlertClockTicked.type, 'the alerts clock, appended by the service, not a command'],
]);

const BY_TYPE = new Map(MAPPINGS.map(([definition, map]) => [definition.type, map]));

/** The event types the audit log lists (some events of them may still be none: a tag retired with its owner). */
export const AUDITED_EVENT_TYPES: readonly string[] = [...BY_TYPE.keys()];

/** The audit fact of an event, or null when it is none (a type that is not audited, or an event of it that is no command). */
export function auditFactOf(event: RecordedEvent): AuditFact | null {
  const map = BY_TYPE.get(event.type);
  return map ? map(event.data as never, event) : null;
}

/** Every action of the audit log, for the `action` filter and the docs' table. */
export const ACTIONS: readonly string[] = [
  'asset.created',
  'asset.updated',
  'asset.renamed',
  'asset.deleted',
  'asset.restored',
  'location.created',
  'location.updated',
  'location.moved',
  'location.renamed',
  'location.deleted',
  'location.restored',
  'tag.attached',
  'tag.detached',
  'organization.created',
  'api_key.minted',
  'api_key.revoked',
  'user.created',
  'user.setup_link_issued',
  'user.password_set',
  'membership.granted',
  'membership.role_changed',
  'membership.removed',
  'membership.invited',
  'membership.invitation_accepted',
  'membership.invitation_cancelled',
  'reader.registered',
  'scan_point.assigned',
  'scan_point.unassigned',
  'webhook_endpoint.created',
  'webhook_endpoint.updated',
  'webhook_endpoint.deleted',
  'webhook_endpoint.secret_rotated',
  'alert_rule.created',
  'alert_rule.updated',
  'alert_rule.deleted',
  'alert.acknowledged',
  'count.started',
  'count.closed',
];
