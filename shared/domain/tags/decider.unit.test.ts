import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../errors.js';
import { decideDetachTag, evolveTags, tagAttachedEvent, tagReservationValue } from './decider.js';

const owner = { orgId: 1, ownerType: 'location' as const, ownerId: 5 };
const at = '2026-01-01T00:00:00.000Z';

describe('tag decider', () => {
  it('rfid reservation values are case-insensitive; other types keep their case', () => {
    expect(tagReservationValue('rfid', 'e280ab')).toBe(tagReservationValue('rfid', 'E280AB'));
    expect(tagReservationValue('barcode', 'ab')).not.toBe(tagReservationValue('barcode', 'AB'));
    expect(tagReservationValue('rfid', 'X')).not.toBe(tagReservationValue('ble', 'X'));
  });

  it('given an attached tag, when detached, then TagDetached and the tag leaves the state', () => {
    const attached = tagAttachedEvent(owner, 3, { tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null }, at);
    const tags = evolveTags([], attached);
    expect(tags).toEqual([{ id: 3, tag_type: 'ble', value: 'b1', is_active: true, valid_from: null, valid_to: null, created_at: at }]);
    const { events } = decideDetachTag(owner, tags, 3, at);
    expect(events).toEqual([{ type: 'TagDetached', data: { org_id: 1, owner_type: 'location', owner_id: 5, tag_id: 3, tag_type: 'ble', value: 'b1', reason: 'detached', at } }]);
    expect(evolveTags(tags, events[0]!)).toEqual([]);
  });

  it('detaching a tag the owner does not hold → not found', () => {
    expect(() => decideDetachTag(owner, [], 3, at)).toThrow(NotFoundError);
  });
});
