import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from './database.js';

export interface TestService {
  service: RunningService;
  db: TestDatabase;
  /** e.g. http://127.0.0.1:41234/api/v1 */
  apiUrl: string;
  opsUrl: string;
  /** e.g. http://127.0.0.1:41235/ingest/v1 (when the ingest role runs) */
  ingestUrl: string;
  stop(): Promise<void>;
}

/**
 * Starts the whole service in this process on ephemeral ports against a fresh database, for
 * tests over real HTTP. `env` overrides configuration variables.
 */
export async function startTestService(label: string, env: Record<string, string> = {}): Promise<TestService> {
  const db = await createTestDatabase(label);
  const config = loadConfig({ PORT: '0', OPS_PORT: '0', INGEST_PORT: '0', LOG_LEVEL: 'silent', PG_POOL_SIZE: '30', ...env });
  const service = await startService(config, db.url, createLogger(config.LOG_LEVEL));
  return {
    service,
    db,
    apiUrl: service.urls.api!,
    opsUrl: service.urls.ops!,
    ingestUrl: service.urls.ingest ?? '',
    async stop() {
      await service.stop();
      await db.drop();
    },
  };
}
