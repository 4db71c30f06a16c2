import type { Decider } from '../decider.js';
import { refuse } from '../refusal.js';
import type { ReaderEvent } from './events.js';

/** A fixed reader: which org it belongs to, and where each of its capture points is assigned. */
export interface ReaderState {
  orgId: number | null;
  registeredAt: string | null;
  /** Capture point → location id (evolve makes a new map, never changes one). */
  points: ReadonlyMap<string, number>;
}

export const initialState: ReaderState = { orgId: null, registeredAt: null, points: new Map() };

export function evolve(state: ReaderState, event: ReaderEvent): ReaderState {
  switch (event.type) {
    case 'ReaderRegistered':
      return { ...state, orgId: event.data.org_id, registeredAt: event.data.at };
    case 'ScanPointAssigned':
      return { ...state, points: new Map(state.points).set(event.data.capture_point, event.data.location_id) };
    case 'ScanPointUnassigned': {
      const points = new Map(state.points);
      points.delete(event.data.capture_point);
      return { ...state, points };
    }
  }
}

export type ReaderCommand =
  | { type: 'RegisterReader'; orgId: number; readerId: string; at: string }
  /** `locationId` is an existing location of the org (the handler resolved it). */
  | { type: 'AssignScanPoint'; orgId: number; readerId: string; capturePoint: string; locationId: number; at: string }
  | { type: 'UnassignScanPoint'; orgId: number; readerId: string; capturePoint: string; at: string };

function requireReaderOf(state: ReaderState, orgId: number, readerId: string): void {
  if (state.orgId !== orgId) throw refuse.notFound(`reader ${readerId} is not registered in organization ${orgId}`);
}

/**
 * Registering is idempotent within the org that holds the reader and refused for any other;
 * assigning an already assigned point moves it; unassigning a point that is not assigned is an
 * error.
 */
export function decide(command: ReaderCommand, state: ReaderState): ReaderEvent[] {
  switch (command.type) {
    case 'RegisterReader':
      if (state.orgId === command.orgId) return [];
      if (state.orgId !== null) throw refuse.conflict(`reader ${command.readerId} is already registered to organization ${state.orgId}`);
      return [{ type: 'ReaderRegistered', data: { org_id: command.orgId, reader_id: command.readerId, at: command.at } }];
    case 'AssignScanPoint':
      requireReaderOf(state, command.orgId, command.readerId);
      if (state.points.get(command.capturePoint) === command.locationId) return [];
      return [
        {
          type: 'ScanPointAssigned',
          data: { org_id: command.orgId, reader_id: command.readerId, capture_point: command.capturePoint, location_id: command.locationId, at: command.at },
        },
      ];
    case 'UnassignScanPoint':
      requireReaderOf(state, command.orgId, command.readerId);
      if (!state.points.has(command.capturePoint)) throw refuse.notFound(`capture point ${command.capturePoint} of reader ${command.readerId} is not assigned`);
      return [{ type: 'ScanPointUnassigned', data: { org_id: command.orgId, reader_id: command.readerId, capture_point: command.capturePoint, at: command.at } }];
  }
}

export const readerDecider: Decider<ReaderState, ReaderCommand, ReaderEvent> = { initialState, evolve, decide };
