import { fieldErrors, type FieldError } from '../../errors.js';
import type { Decider } from '../decider.js';
import { refuse, type DomainRefusal } from '../refusal.js';
import type { CountEvent } from './events.js';
import type { ZoneRef } from './schema.js';

/**
 * A count's own stream (`count-<org>-<id>`; docs/api.md "Counts"): whether it was started and
 * closed, and the decisions on it. The location a zone reference names is read by the handler
 * and passed in on the command.
 */

export interface CountState {
  started: boolean;
  closed: boolean;
}

/** A zone reference and the existing location of the org the handler found for it. */
export interface ZoneLookup {
  ref: ZoneRef;
  found: { id: number } | null;
}

export type CountCommand =
  | { type: 'StartCount'; orgId: number; countId: number; name: string | null; zone: ZoneLookup; at: string }
  | { type: 'CloseCount'; orgId: number; countId: number; at: string };

export function countNotFound(): DomainRefusal {
  return refuse.notFound('Count not found');
}

function zoneOf({ ref, found }: ZoneLookup): number | FieldError[] {
  if (found) return found.id;
  return [
    fieldErrors.fkNotFound(
      ref.field,
      ref.field === 'location_id' ? `location_id ${ref.id} does not reference a live location` : `location_external_key "${ref.externalKey}" does not reference a live location`,
    ),
  ];
}

/**
 * A start names an existing location of the organization (else 400, `fk_not_found` on the field
 * that named it); a count is started once (its id is new). A close of a count that was never
 * started is not found; a close of a closed count appends nothing (the same count, unchanged).
 */
export const countDecider: Decider<CountState, CountCommand, CountEvent> = {
  initialState: { started: false, closed: false },
  evolve(state, event) {
    return event.type === 'CountStarted' ? { ...state, started: true } : { ...state, closed: true };
  },
  decide(command, state) {
    switch (command.type) {
      case 'StartCount': {
        const zone = zoneOf(command.zone);
        if (Array.isArray(zone)) throw refuse.invalid(zone);
        if (state.started) throw refuse.conflict('This count was started already');
        return [{ type: 'CountStarted', data: { org_id: command.orgId, count_id: command.countId, name: command.name, location_id: zone, at: command.at } }];
      }
      case 'CloseCount':
        if (!state.started) throw countNotFound();
        if (state.closed) return [];
        return [{ type: 'CountClosed', data: { org_id: command.orgId, count_id: command.countId, at: command.at } }];
    }
  },
};
