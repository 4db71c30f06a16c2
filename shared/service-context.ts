import type pg from 'pg';
import type { Config } from './config.js';
import type { EventStore } from './event-store/port.js';
import type { Logger } from './logger.js';
import type { ReadModelQueries } from './domain/read-model-queries.js';
import type { CommandPort } from './domain/port.js';
import type { CheckpointWatcher } from './projection/checkpoints.js';
import type { KeyEncryption } from './auth/key-encryption-source.js';
import { signingKeyTokens } from './auth/token-signer.js';
import { postgresIds } from './db/ids.js';
import { postgresCredentials } from './auth/credentials.js';
import { openCliSession } from './auth/app-sessions.js';
import type { DatabaseTarget } from './db/connections.js';

/**
 * What every role and command needs: configuration, the read-model pool (search_path is the
 * current read model), the event store, and read-your-writes waiting. It is a command port as it
 * stands (`domain/port.ts`): a role hands it to the command handlers, which use only the port's
 * members.
 */
export interface ServiceContext extends CommandPort {
  config: Config;
  log: Logger;
  /** Postgres pool; unqualified table names resolve to the current read model. */
  pool: pg.Pool;
  /** The pool's own connection (the runtime database role's, when database roles are set up). */
  databaseUrl: string;
  /** Every connection this installation uses: migrations (DDL) and the analysts' as well. */
  database: DatabaseTarget;
  /** The keys that open the signing keys' private halves, and where they come from. */
  keyEncryption: KeyEncryption;
  store: EventStore;
  checkpoints: CheckpointWatcher;
  /** The read models' answers to what decisions need (see `domain/read-model-queries.ts`). */
  readModels: ReadModelQueries;
}

/**
 * The members of the command port that the infrastructure provides over Postgres, built once
 * when the context opens: ids from the sequences and key counters of `pool`, tokens signed with
 * the active signing key, opened with `keyEncryption`'s keys, as the issuer `config.ENVIRONMENT`,
 * and the password credentials of `service.user_credentials`.
 */
export function postgresCommandPorts(
  pool: pg.Pool,
  keyEncryption: Pick<KeyEncryption, 'keys'>,
  config: { readonly ENVIRONMENT: string },
): Pick<CommandPort, 'ids' | 'tokens' | 'credentials' | 'sessions'> {
  return {
    ids: postgresIds(pool),
    tokens: signingKeyTokens(pool, keyEncryption, config),
    credentials: postgresCredentials(pool),
    sessions: { openCliSession: (input) => openCliSession(pool, input) },
  };
}
