import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DomainRefusal } from '../refusal.js';
import { alertDecider, decide, evolve, initialState, type AlertRuleCommand, type AlertRulesState, type ZoneLookup } from './decider.js';
import { ALERT_RULE_KINDS, type AlertRuleEvent, type AlertRuleKind } from './events.js';

/** The alert rules decider (docs/api.md "Alerts"): given(events).when(command).then(events | error), with no I/O. */

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';
const fold = (events: readonly AlertRuleEvent[]): AlertRulesState => events.reduce(evolve, initialState);
const zone = (id: number): ZoneLookup => ({ ref: { field: 'location_id', id }, found: { id } });

function refusal(events: readonly AlertRuleEvent[], command: AlertRuleCommand): DomainRefusal {
  try {
    decide(command, fold(events));
  } catch (error) {
    if (error instanceof DomainRefusal) return error;
    throw error;
  }
  throw new Error('the command was accepted');
}

const fieldsOf = (error: DomainRefusal) => error.fields.map((f) => `${f.field}:${f.code}`);

const create = (id: number, over: Partial<Extract<AlertRuleCommand, { type: 'CreateAlertRule' }>> = {}): AlertRuleCommand => ({
  type: 'CreateAlertRule',
  orgId: 3,
  ruleId: id,
  name: `rule ${id}`,
  kind: 'left',
  zone: zone(7),
  thresholdSeconds: null,
  assetIds: null,
  missingAssetIds: [],
  isActive: true,
  max: 100,
  at: T0,
  ...over,
});

const created = (id: number, kind: AlertRuleKind = 'left', threshold: number | null = null): AlertRuleEvent => ({
  type: 'AlertRuleCreated',
  data: { org_id: 3, rule_id: id, name: `rule ${id}`, kind, location_id: 7, threshold_seconds: threshold, asset_ids: null, is_active: true, at: T0 },
});

const update = (id: number, patch: Extract<AlertRuleCommand, { type: 'UpdateAlertRule' }>['patch'], missingAssetIds: number[] = []): AlertRuleCommand => ({
  type: 'UpdateAlertRule',
  orgId: 3,
  ruleId: id,
  patch,
  missingAssetIds,
  at: T1,
});

describe('alert rules: create', () => {
  it('a valid rule is created with the zone the look-up found', () => {
    expect(decide(create(1, { zone: { ref: { field: 'location_external_key', externalKey: 'BAY' }, found: { id: 9 } } }), initialState)).toEqual([
      { type: 'AlertRuleCreated', data: { org_id: 3, rule_id: 1, name: 'rule 1', kind: 'left', location_id: 9, threshold_seconds: null, asset_ids: null, is_active: true, at: T0 } },
    ]);
  });

  it('threshold_seconds: required for dwell_exceeded and not_seen, invalid_value for entered and left, whatever the kind (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ALERT_RULE_KINDS), fc.option(fc.integer({ min: 60, max: 2_592_000 })), (kind, threshold) => {
        const timed = kind === 'dwell_exceeded' || kind === 'not_seen';
        const command = create(1, { kind, thresholdSeconds: threshold });
        if (timed === (threshold !== null)) expect(decide(command, initialState)).toHaveLength(1);
        else expect(fieldsOf(refusal([], command))).toEqual([timed ? 'threshold_seconds:required' : 'threshold_seconds:invalid_value']);
      }),
    );
  });

  it('every field error at once, in the rule field order: zone, threshold, assets', () => {
    const error = refusal([], create(1, { kind: 'not_seen', zone: { ref: { field: 'location_external_key', externalKey: 'GONE' }, found: null }, assetIds: [4, 5, 6], missingAssetIds: [5, 6] }));
    expect(error.kind).toBe('invalid');
    expect(error.fields).toEqual([
      { field: 'location_external_key', code: 'fk_not_found', message: 'location_external_key "GONE" does not reference a live location' },
      { field: 'threshold_seconds', code: 'required', message: 'threshold_seconds is required for a not_seen rule' },
      { field: 'asset_ids', code: 'fk_not_found', message: 'asset_ids 5, 6 do not reference an existing asset' },
    ]);
  });

  it('at most `max` rules: the next is a conflict; a deleted one no longer counts', () => {
    const three = [created(1), created(2), created(3)];
    const error = refusal(three, create(4, { max: 3 }));
    expect([error.kind, error.message]).toEqual(['conflict', 'An organization has at most 3 alert rules; delete one first']);
    expect(decide(create(4, { max: 3 }), fold([...three, { type: 'AlertRuleDeleted', data: { org_id: 3, rule_id: 2, at: T1 } }]))).toHaveLength(1);
  });

  it('field errors come before the limit', () => {
    expect(refusal([created(1)], create(2, { max: 1, kind: 'entered', thresholdSeconds: 60 })).kind).toBe('invalid');
  });
});

describe('alert rules: update and delete', () => {
  it('records only the fields that change; equal values append nothing', () => {
    expect(decide(update(1, { name: 'rule 1', kind: 'left', zone: zone(7), is_active: true }), fold([created(1)]))).toEqual([]);
    expect(decide(update(1, { name: 'renamed', is_active: false }), fold([created(1)]))).toEqual([
      { type: 'AlertRuleUpdated', data: { org_id: 3, rule_id: 1, changes: { name: 'renamed', is_active: false }, at: T1 } },
    ]);
  });

  it('judges the merged rule as a create: a kind change needs its threshold to match', () => {
    expect(fieldsOf(refusal([created(1)], update(1, { kind: 'dwell_exceeded' })))).toEqual(['threshold_seconds:required']);
    expect(decide(update(1, { kind: 'dwell_exceeded', threshold_seconds: 7200 }), fold([created(1)]))).toEqual([
      { type: 'AlertRuleUpdated', data: { org_id: 3, rule_id: 1, changes: { kind: 'dwell_exceeded', threshold_seconds: 7200 }, at: T1 } },
    ]);
    expect(fieldsOf(refusal([created(1, 'not_seen', 60)], update(1, { kind: 'entered' })))).toEqual(['threshold_seconds:invalid_value']);
    expect(fieldsOf(refusal([created(1, 'not_seen', 60)], update(1, { threshold_seconds: null })))).toEqual(['threshold_seconds:required']);
  });

  it('a zone named twice must name one location; a missing one is fk_not_found; missing assets too', () => {
    expect(fieldsOf(refusal([created(1)], update(1, { zone: { ref: { field: 'both', id: 7, externalKey: 'OTHER' }, found: { id: 8 } } })))).toEqual([
      'location_id:ambiguous_fields',
      'location_external_key:ambiguous_fields',
    ]);
    expect(decide(update(1, { zone: { ref: { field: 'both', id: 8, externalKey: 'B' }, found: { id: 8 } } }), fold([created(1)]))[0]!.data).toMatchObject({ changes: { location_id: 8 } });
    expect(fieldsOf(refusal([created(1)], update(1, { zone: { ref: { field: 'location_id', id: 99 }, found: null } })))).toEqual(['location_id:fk_not_found']);
    expect(fieldsOf(refusal([created(1)], update(1, { asset_ids: [1, 2] }, [2])))).toEqual(['asset_ids:fk_not_found']);
  });

  it('an unknown or deleted rule is not found', () => {
    const deleted: AlertRuleEvent = { type: 'AlertRuleDeleted', data: { org_id: 3, rule_id: 1, at: T1 } };
    expect(refusal([], update(1, { name: 'x' })).kind).toBe('not_found');
    expect(refusal([created(1), deleted], { type: 'DeleteAlertRule', orgId: 3, ruleId: 1, at: T1 }).kind).toBe('not_found');
    expect(decide({ type: 'DeleteAlertRule', orgId: 3, ruleId: 1, at: T1 }, fold([created(1)]))).toEqual([deleted]);
  });
});

describe('alerts: acknowledge', () => {
  it('appends once; an alert acknowledged before appends nothing', () => {
    const command = { type: 'AcknowledgeAlert' as const, orgId: 3, alertId: '1-2-1', ruleId: 1, assetId: 2, at: T1 };
    const events = alertDecider.decide(command, alertDecider.initialState);
    expect(events).toEqual([{ type: 'AlertAcknowledged', data: { org_id: 3, alert_id: '1-2-1', rule_id: 1, asset_id: 2, at: T1 } }]);
    expect(alertDecider.decide(command, events.reduce(alertDecider.evolve, alertDecider.initialState))).toEqual([]);
  });
});
