import type pg from 'pg';
import { prepared } from '../../shared/db/prepared.js';
import { LocationDeleted, type LocationDeletedData } from '../../shared/domain/locations/events.js';
import {
  ReaderRegistered,
  ScanPointAssigned,
  ScanPointUnassigned,
  type ReaderRegisteredData,
  type ScanPointAssignedData,
  type ScanPointUnassignedData,
} from '../../shared/domain/readers/events.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';

/** Readers and scan points (migrations/read-model/310_readers.sql). */
export const readersProjection: Projection = {
  name: 'readers',
  tables: ['readers', 'scan_points'],
  eventTypes: [ReaderRegistered.type, ScanPointAssigned.type, ScanPointUnassigned.type, LocationDeleted.type],
  async apply(events: RecordedEvent[], tx: pg.PoolClient): Promise<void> {
    for (const event of events) {
      switch (event.type) {
        case ReaderRegistered.type: {
          const d = event.data as ReaderRegisteredData;
          await tx.query(prepared('INSERT INTO readers (reader_id, org_id, registered_at) VALUES ($1, $2, $3) ON CONFLICT (reader_id) DO NOTHING', [d.reader_id, d.org_id, d.at]));
          break;
        }
        case ScanPointAssigned.type: {
          const d = event.data as ScanPointAssignedData;
          await tx.query(
            prepared(
              `INSERT INTO scan_points (reader_id, capture_point, org_id, location_id) VALUES ($1, $2, $3, $4)
               ON CONFLICT (reader_id, capture_point) DO UPDATE SET location_id = EXCLUDED.location_id`,
              [d.reader_id, d.capture_point, d.org_id, d.location_id],
            ),
          );
          break;
        }
        case ScanPointUnassigned.type: {
          const d = event.data as ScanPointUnassignedData;
          await tx.query(prepared('DELETE FROM scan_points WHERE reader_id = $1 AND capture_point = $2', [d.reader_id, d.capture_point]));
          break;
        }
        case LocationDeleted.type: {
          const d = event.data as LocationDeletedData;
          await tx.query(prepared('DELETE FROM scan_points WHERE org_id = $1 AND location_id = $2', [d.org_id, d.location_id]));
          break;
        }
      }
    }
  },
};
