import type pg from 'pg';
import type { Config } from './config.js';
import type { EventStore } from './event-store/port.js';
import type { Logger } from './logger.js';
import type { ReadModelQueries } from './domain/reads.js';
import type { CheckpointWatcher } from './projection/checkpoints.js';
import type { KeyEncryption } from './auth/key-encryption-source.js';
import type { DatabaseTarget } from './db/connections.js';

/**
 * What every role and command needs: configuration, the read-model pool (search_path is the
 * live read model), the event store, and read-your-writes waiting.
 */
export interface ServiceContext {
  config: Config;
  log: Logger;
  /** Postgres pool; unqualified table names resolve to the live read model. */
  pool: pg.Pool;
  /** The pool's own connection (the runtime role's, when roles are set up). */
  databaseUrl: string;
  /** Every connection this installation uses: migrations (DDL) and the analysts' as well. */
  database: DatabaseTarget;
  /** The keys that open the signing keys' private halves, and where they come from. */
  keyEncryption: KeyEncryption;
  store: EventStore;
  checkpoints: CheckpointWatcher;
  /** The read models' answers to what decisions need (see `domain/reads.ts`). */
  reads: ReadModelQueries;
}
