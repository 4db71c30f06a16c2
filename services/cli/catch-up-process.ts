/**
 * The entry of a process that `projections rebuild` and `replay --parallel <n>` fork to apply
 * their share of the segments (shared/projection/catch-up-processes.ts): it knows the projections
 * and how to open the log, and waits for its plan.
 */
import { allProjections } from '../../projections/index.js';
import { buildCatalogue } from '../../shared/domain/catalogue.js';
import { PostgresEventStore } from '../../shared/event-store/postgres.js';
import { appliedNamed, serveCatchUpProcess } from '../../shared/projection/catch-up-processes.js';

serveCatchUpProcess({
  projections: (names) => appliedNamed(allProjections(), names),
  async openStore(connection, pool) {
    if (connection.store.kind === 'postgres') return new PostgresEventStore(pool, connection.databaseUrl, { catalogue: buildCatalogue() });
    const { openKurrentDbEventStore } = await import('../../shared/event-store/kurrentdb.js');
    return openKurrentDbEventStore(connection.store.url, { catalogue: buildCatalogue() });
  },
});
