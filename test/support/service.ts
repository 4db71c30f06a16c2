import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { guardResponses, unguardResponses } from './openapi-guard.js';

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
 * The key-encryption key of this test file's services (signing keys are stored encrypted); CLI
 * runs and second instances on the same database need the same one.
 */
export const TEST_SIGNING_KEY_ENCRYPTION_KEY = randomBytes(32).toString('base64');

/**
 * Starts the whole service in this process on ephemeral ports against a fresh database, for
 * tests over real HTTP. `env` overrides configuration variables; `options.db` is a database the
 * test prepared before the start (it is dropped with the service).
 */
export async function startTestService(label: string, env: Record<string, string> = {}, options: { db?: TestDatabase } = {}): Promise<TestService> {
  const db = options.db ?? (await createTestDatabase(label));
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    INGEST_PORT: '0',
    LOG_LEVEL: 'silent',
    PG_POOL_SIZE: '30',
    SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY,
    ...env,
  });
  const service = await startService(config, db.url, createLogger(config.LOG_LEVEL));
  // Each listener's responses are checked against the document it publishes (openapi-guard.ts).
  const listeners = [service.urls.api, service.urls.ingest].filter((url): url is string => url !== undefined);
  for (const base of listeners) await guardResponses(base, new URL('/openapi/v1.json', base).href);
  return {
    service,
    db,
    apiUrl: service.urls.api!,
    opsUrl: service.urls.ops!,
    ingestUrl: service.urls.ingest ?? '',
    async stop() {
      for (const base of listeners) unguardResponses(base);
      await service.stop();
      await db.drop();
    },
  };
}
