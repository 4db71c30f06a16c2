import { z } from 'zod';
import { defineEvent } from '../../event-store/catalogue.js';

/**
 * Fixed readers and their scan points. A reader id is global (gateways key Kafka messages by it),
 * so its stream is `reader-<reader id>` and it belongs to one org: the first registration decides.
 * A scan point is a (reader, capture point) pair assigned to a location.
 */

const readerId = z.string().min(1).max(255);
const capturePoint = z.string().min(1).max(255);

export const ReaderRegistered = defineEvent(
  'ReaderRegistered',
  1,
  z.object({ org_id: z.number().int().positive(), reader_id: readerId, at: z.string() }),
);

export const ScanPointAssigned = defineEvent(
  'ScanPointAssigned',
  1,
  z.object({ org_id: z.number().int().positive(), reader_id: readerId, capture_point: capturePoint, location_id: z.number().int().positive(), at: z.string() }),
);

export const ScanPointUnassigned = defineEvent(
  'ScanPointUnassigned',
  1,
  z.object({ org_id: z.number().int().positive(), reader_id: readerId, capture_point: capturePoint, at: z.string() }),
);

export type ReaderRegisteredData = z.infer<typeof ReaderRegistered.schema>;
export type ScanPointAssignedData = z.infer<typeof ScanPointAssigned.schema>;
export type ScanPointUnassignedData = z.infer<typeof ScanPointUnassigned.schema>;

export type ReaderEvent =
  | { type: 'ReaderRegistered'; data: ReaderRegisteredData }
  | { type: 'ScanPointAssigned'; data: ScanPointAssignedData }
  | { type: 'ScanPointUnassigned'; data: ScanPointUnassignedData };

export const readerEvents = [ReaderRegistered, ScanPointAssigned, ScanPointUnassigned];

export function readerStream(readerId: string): string {
  return `reader-${encodeURIComponent(readerId)}`;
}
