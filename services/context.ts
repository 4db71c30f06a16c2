import type pg from 'pg';
import type { Config } from '../shared/config.js';
import type { EventStore } from '../shared/event-store/port.js';
import type { Logger } from '../shared/logger.js';
import type { CheckpointWatcher } from './projector/checkpoints.js';

/**
 * What every role and command needs: configuration, the read-model pool (search_path is the
 * live read model), the event store, and read-your-writes waiting.
 */
export interface ServiceContext {
  config: Config;
  log: Logger;
  /** Postgres pool; unqualified table names resolve to the live read model. */
  pool: pg.Pool;
  databaseUrl: string;
  store: EventStore;
  checkpoints: CheckpointWatcher;
}
