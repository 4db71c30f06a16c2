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
import { ReaderMessageDeadLettered, type ReaderMessageDeadLetteredData } from '../../shared/domain/scans/events.js';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';

/** The first characters of a dead letter's payload, as the CLI lists it. */
export const PAYLOAD_PREVIEW_CHARS = 120;

/** Readers and scan points (migrations/read-model/310_readers.sql), and readers' dead letters (311). */
export const readersProjection: Projection = {
  name: 'readers',
  tables: ['readers', 'scan_points', 'scan_dead_letters'],
  eventTypes: [ReaderRegistered.type, ScanPointAssigned.type, ScanPointUnassigned.type, LocationDeleted.type, ReaderMessageDeadLettered.type],
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
        case ReaderMessageDeadLettered.type: {
          const d = event.data as ReaderMessageDeadLetteredData;
          const preview = d.payload_encoding === 'utf8' ? d.payload : `base64:${d.payload}`;
          await tx.query(
            prepared(
              `INSERT INTO scan_dead_letters (id, transport, topic, reason, reader_id, org_id, payload_preview, received_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
              [event.id, d.transport, d.topic, d.reason, d.reader_id, d.org_id, [...preview].slice(0, PAYLOAD_PREVIEW_CHARS).join(''), d.received_at],
            ),
          );
          break;
        }
      }
    }
  },
};
