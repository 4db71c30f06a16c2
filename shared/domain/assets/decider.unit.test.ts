import { describe, expect, it } from 'vitest';
import { NotFoundError, ValidationFailed } from '../../errors.js';
import { decideCreate, decideDelete, decideRename, decideUpdate, fold, type AssetPatch } from './decider.js';

/** given(events).when(command).then(events | error), with no I/O. */

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-02T00:00:00.000Z';
const NOW = new Date('2026-06-01T00:00:00Z');

function given(...commands: Array<(state: ReturnType<typeof fold>) => Array<{ type: string; data: unknown }>>) {
  const events: Array<{ type: string; data: unknown }> = [];
  for (const command of commands) events.push(...command(fold(events)));
  return fold(events);
}

const created = () =>
  decideCreate(
    {
      orgId: 7,
      assetId: 42,
      externalKey: 'ASSET-0001',
      minted: true,
      name: 'Forklift',
      description: null,
      isActive: true,
      validFrom: null,
      validTo: null,
      metadata: { colour: 'red' },
      tags: [{ tagId: 9, input: { tag_type: 'rfid', value: 'E280', is_active: true, valid_from: null, valid_to: null } }],
      at: T0,
    },
    null,
  );

const update = (patch: AssetPatch) => (state: ReturnType<typeof fold>) =>
  decideUpdate({ assetId: 42, patch, currentLocation: { id: null, external_key: null }, now: NOW, at: T1 }, state);

describe('asset decider', () => {
  it('create → AssetCreated then one TagAttached per embedded tag', () => {
    const events = created();
    expect(events.map((e) => e.type)).toEqual(['AssetCreated', 'TagAttached']);
    const state = fold(events)!;
    expect(state).toMatchObject({ id: 42, external_key: 'ASSET-0001', created_at: T0, updated_at: T0, deleted_at: null });
    expect(state.tags.map((t) => t.id)).toEqual([9]);
  });

  it('update with equal values (a verbatim view) → no events', () => {
    const state = given(created);
    const view = { ...state!, tags: state!.tags, location_id: null, location_external_key: null, valid_from: null } as unknown as AssetPatch;
    expect(update({ ...view, valid_from: null, valid_to: null })(state)).toEqual([]);
  });

  it('update with a change → AssetUpdated carrying only the changed fields; state advances updated_at', () => {
    const state = given(created);
    const events = update({ name: 'Reach truck', description: null, metadata: { colour: 'red' } })(state);
    expect(events).toEqual([{ type: 'AssetUpdated', data: { org_id: 7, asset_id: 42, changes: { name: 'Reach truck' }, at: T1 } }]);
    expect(fold([...created(), ...events])!.updated_at).toBe(T1);
  });

  it('update: differing read-only fields → read_only errors in view order; null valid_from when set → invalid_value', () => {
    const state = given(created, update({ valid_from: new Date(T0) }));
    try {
      update({ tags: [], id: 1, valid_from: null, external_key: 'X' })(state);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationFailed);
      expect((error as ValidationFailed).fields.map((f) => [f.field, f.code])).toEqual([
        ['id', 'read_only'],
        ['external_key', 'read_only'],
        ['valid_from', 'invalid_value'],
        ['tags', 'read_only'],
      ]);
    }
  });

  it('update: valid_to not after valid_from → invalid_value on valid_to', () => {
    const state = given(created);
    expect(() => update({ valid_from: new Date(T1), valid_to: new Date(T0) })(state)).toThrow(ValidationFailed);
  });

  it('rename to the same key → no events; to another → AssetRenamed with the previous key', () => {
    const state = given(created);
    expect(decideRename({ assetId: 42, externalKey: 'ASSET-0001', at: T1 }, state)).toEqual([]);
    expect(decideRename({ assetId: 42, externalKey: 'NEW', at: T1 }, state)).toEqual([
      { type: 'AssetRenamed', data: { org_id: 7, asset_id: 42, external_key: 'NEW', previous_external_key: 'ASSET-0001', at: T1 } },
    ]);
  });

  it('delete → retires the live tags, then AssetDeleted; any command on a deleted asset → not found', () => {
    const events = decideDelete({ assetId: 42, at: T1 }, given(created));
    expect(events.map((e) => e.type)).toEqual(['TagDetached', 'AssetDeleted']);
    expect(events[0]!.data).toMatchObject({ tag_id: 9, reason: 'owner_deleted' });
    const deleted = fold([...created(), ...events]);
    expect(deleted!.tags).toEqual([]);
    expect(() => decideDelete({ assetId: 42, at: T1 }, deleted)).toThrow(NotFoundError);
    expect(() => decideRename({ assetId: 42, externalKey: 'X', at: T1 }, deleted)).toThrow(NotFoundError);
    expect(() => update({ name: 'x' })(deleted)).toThrow(NotFoundError);
    expect(() => update({ name: 'x' })(null)).toThrow(NotFoundError);
  });
});
