import fs from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildCatalogue } from '../../shared/domain/catalogue.js';
import type { EventDefinition } from '../../shared/event-store/catalogue.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import { scanEvents } from '../../shared/domain/scans/events.js';
import { assetEvents } from '../../shared/domain/assets/events.js';
import { authEvents } from '../../shared/domain/orgs-and-keys/events.js';
import { locationEvents, locationTreeEvents } from '../../shared/domain/locations/events.js';
import { peopleEvents } from '../../shared/domain/people/events.js';
import { readerEvents } from '../../shared/domain/readers/events.js';
import { tagEvents } from '../../shared/domain/tags/events.js';
import { reservationEvents } from '../../shared/domain/reservations.js';
import { webhookEndpointEvents } from '../../shared/domain/webhook-endpoints/events.js';
import { alertEvents, alertRuleEvents } from '../../shared/domain/alerts/events.js';
import { countEvents } from '../../shared/domain/counts/events.js';
import { ACTIONS, AUDITED_EVENT_TYPES, NOT_AUDITED, RESOURCE_TYPES, actorOfData, auditFactOf } from '../../projections/audit/actions.js';
import { actorOfMetadata } from '../../projections/audit/projection.js';
import { arbitraryOf } from '../properties/arbitraries.js';

/**
 * The event → audit entry mapping (docs/api.md "Audit log"): every event type of the catalogue is
 * either an entry or named as none with its reason, so a new event type cannot be forgotten; scans
 * are none; each entry's action is one of the documented ones, on its resource type.
 */

const AT = '2026-05-25T14:38:11.440Z';

function recorded(type: string, data: Record<string, unknown>, metadata: Record<string, unknown> = {}): RecordedEvent {
  return { id: '0190a6b2-0000-7000-8000-000000000001', type, data, metadata, streamId: 's', revision: 0n, position: { commit: 1n, prepare: 1n }, recordedAt: new Date(AT) };
}

const user = { kind: 'user', user_id: 'usr_1', email: 'ada@example.com' } as const;
const cli = { kind: 'cli' } as const;

/** One event of every audited type, with what its entry says. */
const SAMPLES: Record<string, { data: Record<string, unknown>; expect: Record<string, unknown> | null }> = {
  AssetCreated: {
    data: { org_id: 3, asset_id: 7, at: AT, external_key: 'FORK-7', minted: false, name: 'Forklift', description: null, is_active: true, valid_from: null, valid_to: null, metadata: {} },
    expect: { action: 'asset.created', resourceType: 'asset', resourceId: '7', listedIn: { orgId: 3 }, occurredAt: AT, dataActor: null },
  },
  AssetUpdated: { data: { org_id: 3, asset_id: 7, at: AT, changes: { name: 'Lift' } }, expect: { action: 'asset.updated', state: { kind: 'merge', fields: { name: 'Lift' } } } },
  AssetRenamed: {
    data: { org_id: 3, asset_id: 7, at: AT, external_key: 'LIFT-7', previous_external_key: 'FORK-7' },
    expect: { action: 'asset.renamed', state: { kind: 'merge', fields: { external_key: 'LIFT-7' } } },
  },
  AssetDeleted: { data: { org_id: 3, asset_id: 7, at: AT, external_key: 'LIFT-7' }, expect: { action: 'asset.deleted', externalKey: 'LIFT-7' } },
  AssetRestored: { data: { org_id: 3, asset_id: 7, at: AT, external_key: 'LIFT-7' }, expect: { action: 'asset.restored', resourceType: 'asset', resourceId: '7', externalKey: 'LIFT-7' } },
  LocationCreated: {
    data: { org_id: 3, location_id: 9, external_key: 'DOCK', name: 'Dock', description: null, parent_id: null, is_active: true, valid_from: null, valid_to: null, at: AT },
    expect: { action: 'location.created', resourceType: 'location', resourceId: '9' },
  },
  LocationUpdated: { data: { org_id: 3, location_id: 9, changes: { description: 'north' }, at: AT }, expect: { action: 'location.updated' } },
  LocationMoved: {
    data: { org_id: 3, location_id: 9, parent_id: 4, previous_parent_id: null, at: AT },
    expect: { action: 'location.moved', state: { kind: 'merge', fields: { parent_id: 4 } } },
  },
  LocationRenamed: { data: { org_id: 3, location_id: 9, external_key: 'DOCK-2', previous_external_key: 'DOCK', at: AT }, expect: { action: 'location.renamed' } },
  LocationDeleted: { data: { org_id: 3, location_id: 9, external_key: 'DOCK-2', at: AT }, expect: { action: 'location.deleted', externalKey: 'DOCK-2' } },
  LocationRestored: { data: { org_id: 3, location_id: 9, external_key: 'DOCK-2', parent_id: null, at: AT }, expect: { action: 'location.restored', resourceType: 'location', resourceId: '9', externalKey: 'DOCK-2' } },
  TagAttached: {
    data: { org_id: 3, owner_type: 'asset', owner_id: 7, tag_id: 11, tag_type: 'rfid', value: 'E1', is_active: true, valid_from: null, valid_to: null, at: AT },
    expect: { action: 'tag.attached', resourceType: 'tag', resourceId: '11', externalKey: null },
  },
  TagDetached: {
    data: { org_id: 3, owner_type: 'asset', owner_id: 7, tag_id: 11, tag_type: 'rfid', value: 'E1', reason: 'detached', at: AT },
    expect: { action: 'tag.detached', resourceId: '11' },
  },
  OrgCreated: { data: { org_id: 3, name: 'Acme', created_at: AT }, expect: { action: 'organization.created', resourceType: 'organization', resourceId: '3', listedIn: { orgId: 3 } } },
  ApiKeyMinted: {
    data: { key_id: 'ak_1', org_id: 3, name: 'partner', scopes: ['assets:read'], prefix: 'abc', signing_kid: 'k1', created_at: AT, expires_at: null, minted_by: user },
    expect: { action: 'api_key.minted', resourceId: 'ak_1', dataActor: { type: 'user', id: 'usr_1', name: 'ada@example.com' } },
  },
  ApiKeyRevoked: { data: { key_id: 'ak_1', org_id: 3, revoked_at: AT, revoked_by: cli }, expect: { action: 'api_key.revoked', dataActor: { type: 'cli', id: null, name: 'cli' } } },
  UserCreated: {
    data: { user_id: 'usr_2', email: 'bob@example.com', created_at: AT, created_by: cli },
    expect: { action: 'user.created', resourceType: 'user', resourceId: 'usr_2', listedIn: { user: 'usr_2' }, state: { kind: 'set', fields: { email: 'bob@example.com' } } },
  },
  PasswordSetupIssued: {
    data: { user_id: 'usr_2', setup_id: 'ps_1', secret_sha256: 'a'.repeat(64), issued_at: AT, expires_at: AT, issued_by: user },
    expect: { action: 'user.setup_link_issued', listedIn: { user: 'usr_2' }, dataActor: { type: 'user', id: 'usr_1', name: 'ada@example.com' } },
  },
  PasswordSet: {
    data: { user_id: 'usr_2', credential_id: 'cr_1', set_at: AT, via: { kind: 'setup', setup_id: 'ps_1' } },
    expect: { action: 'user.password_set', dataActor: { type: 'user', id: 'usr_2', name: null } },
  },
  MembershipGranted: {
    data: { user_id: 'usr_2', org_id: 3, role: 'viewer', granted_at: AT, granted_by: user, invitation_id: null },
    expect: { action: 'membership.granted', resourceType: 'membership', resourceId: 'usr_2', listedIn: { orgId: 3 }, joins: { user: 'usr_2', orgId: 3 }, state: { kind: 'set', fields: { role: 'viewer' } } },
  },
  MembershipRoleChanged: {
    data: { user_id: 'usr_2', org_id: 3, role: 'admin', changed_at: AT, changed_by: user },
    expect: { action: 'membership.role_changed', state: { kind: 'merge', fields: { role: 'admin' } } },
  },
  MembershipRemoved: { data: { user_id: 'usr_2', org_id: 3, removed_at: AT, removed_by: user }, expect: { action: 'membership.removed', state: { kind: 'forget' } } },
  InvitationIssued: {
    data: { invitation_id: 'inv_1', org_id: 3, email: 'cy@example.com', role: 'operator', secret_sha256: 'b'.repeat(64), issued_at: AT, expires_at: AT, issued_by: user },
    expect: { action: 'membership.invited', resourceType: 'membership', resourceId: 'inv_1' },
  },
  InvitationAccepted: {
    data: { invitation_id: 'inv_1', org_id: 3, user_id: 'usr_3', accepted_at: AT },
    expect: { action: 'membership.invitation_accepted', dataActor: { type: 'user', id: 'usr_3', name: null } },
  },
  InvitationCancelled: { data: { invitation_id: 'inv_1', org_id: 3, cancelled_at: AT, cancelled_by: cli }, expect: { action: 'membership.invitation_cancelled' } },
  ReaderRegistered: { data: { org_id: 3, reader_id: 'gate-1', at: AT }, expect: { action: 'reader.registered', resourceType: 'reader', resourceId: 'gate-1' } },
  ScanPointAssigned: {
    data: { org_id: 3, reader_id: 'gate-1', capture_point: 'ant-2', location_id: 9, at: AT },
    expect: { action: 'scan_point.assigned', resourceType: 'scan_point', resourceId: 'gate-1/ant-2', state: { kind: 'merge', fields: { location_id: 9 } } },
  },
  ScanPointUnassigned: { data: { org_id: 3, reader_id: 'gate-1', capture_point: 'ant-2', at: AT }, expect: { action: 'scan_point.unassigned', resourceId: 'gate-1/ant-2' } },
  WebhookEndpointCreated: {
    data: { org_id: 3, endpoint_id: 12, url: 'https://partner.example/h', description: null, event_types: ['asset.moved'], not_seen_after_seconds: 3600, secret_id: 'sec-1', at: AT },
    expect: {
      action: 'webhook_endpoint.created',
      resourceType: 'webhook_endpoint',
      resourceId: '12',
      listedIn: { orgId: 3 },
      state: { kind: 'set', fields: { url: 'https://partner.example/h', description: null, event_types: ['asset.moved'], is_active: true, not_seen_after_seconds: 3600 } },
    },
  },
  WebhookEndpointUpdated: {
    data: { org_id: 3, endpoint_id: 12, changes: { is_active: false }, at: AT },
    expect: { action: 'webhook_endpoint.updated', resourceId: '12', state: { kind: 'merge', fields: { is_active: false } } },
  },
  WebhookEndpointDeleted: { data: { org_id: 3, endpoint_id: 12, at: AT }, expect: { action: 'webhook_endpoint.deleted', resourceId: '12', state: { kind: 'forget' } } },
  WebhookEndpointSecretRotated: {
    data: { org_id: 3, endpoint_id: 12, secret_id: 'sec-2', previous_until: AT, at: AT },
    expect: { action: 'webhook_endpoint.secret_rotated', resourceId: '12', dataActor: null },
  },
  AlertRuleCreated: {
    data: { org_id: 3, rule_id: 5, name: 'left the cage', kind: 'left', location_id: 9, threshold_seconds: null, asset_ids: null, is_active: true, at: AT },
    expect: {
      action: 'alert_rule.created',
      resourceType: 'alert_rule',
      resourceId: '5',
      listedIn: { orgId: 3 },
      state: { kind: 'set', fields: { name: 'left the cage', kind: 'left', location_id: 9, threshold_seconds: null, asset_ids: null, is_active: true } },
    },
  },
  AlertRuleUpdated: {
    data: { org_id: 3, rule_id: 5, changes: { is_active: false }, at: AT },
    expect: { action: 'alert_rule.updated', resourceId: '5', state: { kind: 'merge', fields: { is_active: false } } },
  },
  AlertRuleDeleted: { data: { org_id: 3, rule_id: 5, at: AT }, expect: { action: 'alert_rule.deleted', resourceId: '5', state: { kind: 'forget' } } },
  AlertAcknowledged: {
    data: { org_id: 3, alert_id: '5-12-1', rule_id: 5, asset_id: 12, at: AT },
    expect: { action: 'alert.acknowledged', resourceType: 'alert', resourceId: '5-12-1', listedIn: { orgId: 3 } },
  },
  CountStarted: {
    data: { org_id: 3, count_id: 7, name: 'Cage 4', location_id: 9, at: AT },
    expect: { action: 'count.started', resourceType: 'count', resourceId: '7', listedIn: { orgId: 3 }, state: { kind: 'set', fields: { name: 'Cage 4', location_id: 9 } } },
  },
  CountClosed: { data: { org_id: 3, count_id: 7, at: AT }, expect: { action: 'count.closed', resourceType: 'count', resourceId: '7', listedIn: { orgId: 3 } } },
};

const catalogue = buildCatalogue();
const definitions: EventDefinition[] = [...reservationEvents, ...authEvents, ...peopleEvents, ...assetEvents, ...tagEvents, ...locationEvents, ...locationTreeEvents, ...readerEvents, ...scanEvents, ...webhookEndpointEvents, ...alertRuleEvents, ...alertEvents, ...countEvents];

describe('every event type of the catalogue', () => {
  it('is either an audit entry or named as none, never both', () => {
    const types = catalogue.types();
    expect(types.length).toBeGreaterThan(30);
    const audited = new Set(AUDITED_EVENT_TYPES);
    expect(types.filter((type) => audited.has(type) === NOT_AUDITED.has(type))).toEqual([]);
    expect([...audited, ...NOT_AUDITED.keys()].filter((type) => !catalogue.has(type))).toEqual([]);
  });

  it('scans are none: a handheld submission, a reader read, a dead letter', () => {
    for (const definition of scanEvents) expect(NOT_AUDITED.has(definition.type), definition.type).toBe(true);
    expect(AUDITED_EVENT_TYPES).not.toContain('ScansRecorded');
  });

  it('each audited type has its sample here, and the sample says what the docs say', () => {
    expect(Object.keys(SAMPLES).sort()).toEqual([...AUDITED_EVENT_TYPES].sort());
    for (const [type, sample] of Object.entries(SAMPLES)) {
      // The sample is a payload the catalogue accepts.
      const valid = catalogue.validate({ type, data: sample.data });
      const fact = auditFactOf(recorded(type, valid.data));
      expect(fact, type).not.toBeNull();
      expect(fact, type).toMatchObject(sample.expect!);
      expect(fact!.action.split('.')[0], type).toBe(fact!.resourceType);
    }
    // Every action of the filter's list comes from an event type, and no event gives another.
    const actions = Object.entries(SAMPLES).map(([type, sample]) => auditFactOf(recorded(type, sample.data))!.action);
    expect([...new Set(actions)].sort()).toEqual([...ACTIONS].sort());
  });

  it('an event of an earlier version maps too: a setup link of version 1 names nobody', () => {
    const { issued_by: _by, ...v1 } = SAMPLES.PasswordSetupIssued!.data;
    expect(auditFactOf(recorded('PasswordSetupIssued', v1))).toMatchObject({ action: 'user.setup_link_issued', dataActor: null });
  });

  it('a tag retired with its deleted owner is no entry of its own (the delete is)', () => {
    const detached = SAMPLES.TagDetached!.data;
    expect(auditFactOf(recorded('TagDetached', { ...detached, reason: 'owner_deleted' }))).toBeNull();
  });

  it('an event of a type that is none maps to nothing', () => {
    for (const type of NOT_AUDITED.keys()) expect(auditFactOf(recorded(type, {}))).toBeNull();
  });

  it('any payload an audited type accepts maps to a documented action on a documented resource type', () => {
    for (const definition of definitions.filter((d) => AUDITED_EVENT_TYPES.includes(d.type))) {
      fc.assert(
        fc.property(arbitraryOf(definition.schema), (data) => {
          const parsed = definition.schema.safeParse(data);
          if (!parsed.success) return;
          const fact = auditFactOf(recorded(definition.type, parsed.data as Record<string, unknown>));
          if (fact === null) return;
          expect(ACTIONS).toContain(fact.action);
          expect(RESOURCE_TYPES).toContain(fact.resourceType);
          expect(fact.resourceId.length).toBeGreaterThan(0);
          expect(typeof fact.occurredAt).toBe('string');
        }),
        { numRuns: 30, seed: 20261126 },
      );
    }
  });
});

describe("the console's Audit log page", () => {
  it('offers every action as a filter (its list is its own: the console imports nothing of the server)', () => {
    const page = fs.readFileSync(new URL('../../services/api/console/web/src/pages/audit.tsx', import.meta.url), 'utf8');
    const offered = [...page.slice(page.indexOf('const AUDIT_ACTIONS')).matchAll(/^  '([a-z_]+\.[a-z_]+)',$/gm)].map((m) => m[1]);
    expect(offered).toEqual([...ACTIONS]);
  });
});

describe('actors', () => {
  it('as the metadata records them: the four types; anything else is no actor', () => {
    expect(actorOfMetadata({ type: 'api_key', id: 'ak_1', name: 'partner' })).toEqual({ type: 'api_key', id: 'ak_1', name: 'partner' });
    expect(actorOfMetadata({ type: 'cli', id: null, name: 'cli' })).toEqual({ type: 'cli', id: null, name: 'cli' });
    expect(actorOfMetadata({ type: 'system', id: null, name: null })).toEqual({ type: 'system', id: null, name: null });
    expect(actorOfMetadata({ type: 'user', id: 'usr_1', name: 'ada@example.com' })).toEqual({ type: 'user', id: 'usr_1', name: 'ada@example.com' });
    for (const other of [undefined, null, 'cli', { type: 'robot', id: 'x' }, {}]) expect(actorOfMetadata(other)).toBeNull();
  });

  it("as the data of older events names them: a person by id and email, the CLI as the CLI's", () => {
    expect(actorOfData(user)).toEqual({ type: 'user', id: 'usr_1', name: 'ada@example.com' });
    expect(actorOfData(cli)).toEqual({ type: 'cli', id: null, name: 'cli' });
    expect(actorOfData(undefined)).toBeNull();
  });
});
