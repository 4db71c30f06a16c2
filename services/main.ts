import path from 'node:path';
import { loadConfig } from '../shared/config.js';
import { ConfigError } from '../shared/errors.js';
import { DataDirInUseError, startEmbeddedPostgres, type EmbeddedPostgres } from '../shared/db/embedded.js';
import { databaseTarget } from '../shared/db/connections.js';
import { redactSecrets } from '../shared/redaction.js';
import { createLogger } from '../shared/logger.js';
import { startService, type RunningService } from './service.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const log = createLogger(config.LOG_LEVEL);
  let embedded: EmbeddedPostgres | null = null;
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    try {
      embedded = await startEmbeddedPostgres({ dataDir: config.DATA_DIR, log });
    } catch (error) {
      if (error instanceof DataDirInUseError) {
        process.stderr.write(`${error.message}\n`);
        process.exit(1);
      }
      throw error;
    }
    databaseUrl = embedded.url;
    log.info({ dataDir: path.resolve(config.DATA_DIR), port: embedded.port }, 'embedded postgres ready');
  }

  let service: RunningService;
  try {
    service = await startService(config, await databaseTarget(config, embedded), log);
  } catch (error) {
    await embedded?.stop().catch(() => undefined);
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }

  await embedded?.recordListeners(Object.entries(service.urls).map(([listener, url]) => `${listener} ${url}`));

  const lines = ['tracking service ready'];
  if (service.urls.console) lines.push(`  console: ${service.urls.console}`);
  if (service.urls.api) lines.push(`  api:     ${service.urls.api}`);
  if (service.urls.docs) lines.push(`  docs:    ${service.urls.docs}`);
  if (service.urls.ingest) lines.push(`  ingest:  ${service.urls.ingest}`);
  if (service.urls.ops) lines.push(`  ops:     ${service.urls.ops}/healthz  ${service.urls.ops}/readyz  ${service.urls.ops}/metrics`);
  lines.push(`  roles:   ${config.ROLES.join(', ')}`);
  lines.push(`  data:    ${embedded ? path.resolve(config.DATA_DIR) : 'DATABASE_URL'}`);
  process.stdout.write(`${lines.join('\n')}\n`);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    try {
      await service.stop();
      await embedded?.stop();
      process.exit(0);
    } catch (error) {
      log.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
  };
  // SIGTERM from a supervisor (and from npm, which `npm start` replaces by this process with
  // `exec`), SIGINT from Ctrl-C, SIGHUP from a closed terminal: all stop gracefully, database
  // included. Node's default for SIGHUP would end the process and leave Postgres running.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown(signal));
}

main().catch((error: unknown) => {
  process.stderr.write(`fatal: ${redactSecrets(error instanceof Error ? error.message : String(error))}\n`);
  process.exit(1);
});
