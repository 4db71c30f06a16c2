import { ConfigError, loadConfig, type Config } from '../../shared/config.js';
import type { ServiceContext } from '../../shared/context.js';
import { openDatabase } from '../../shared/db/database.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../shared/db/embedded.js';
import type { Pool } from '../../shared/db/pool.js';
import type { Position } from '../../shared/event-store/port.js';
import type { Logger } from '../../shared/logger.js';
import type { ProjectorRuntime } from '../projector/runtime.js';
import type { Output } from './output.js';
import { CliUsageError, type CliContext } from './registry.js';

/**
 * The context a command runs in. Everything opens on first use, so a command pays only for what
 * it touches: `orgs list` opens a pool and reads; `orgs create` also opens the event store and the
 * checkpoint watcher; only a command that waits on projections nobody runs loads the projector.
 */
export interface CliSession extends CliContext {
  close(): Promise<void>;
}

export function openCliSession(out: Output): CliSession {
  let config: Config | null = null;
  let log: Promise<Logger> | null = null;
  let embedded: EmbeddedPostgres | null = null;
  let databaseUrl: Promise<string> | null = null;
  let pool: Promise<Pool> | null = null;
  let service: Promise<ServiceContext> | null = null;
  let runtime: ProjectorRuntime | null = null;
  let closing: Promise<void> | null = null;

  const configOnce = (): Config => {
    if (!config) {
      try {
        config = loadConfig();
      } catch (error) {
        if (error instanceof ConfigError) throw new CliUsageError(error.message);
        throw error;
      }
    }
    return config;
  };
  // The CLI logs only problems, and to stderr: stdout is for the command's output. Only the
  // service context logs, so pino loads with it.
  const logOnce = (): Promise<Logger> =>
    (log ??= (async () => {
      const { createLogger } = await import('../../shared/logger.js');
      const level = configOnce().LOG_LEVEL;
      return createLogger(level === 'info' ? 'warn' : level, 'tracking', 2);
    })());

  const databaseUrlOnce = (): Promise<string> =>
    (databaseUrl ??= (async () => {
      const { DATABASE_URL, DATA_DIR } = configOnce();
      if (DATABASE_URL) return DATABASE_URL;
      embedded = await startEmbeddedPostgres({ dataDir: DATA_DIR });
      return embedded.url;
    })());

  const poolOnce = (): Promise<Pool> =>
    (pool ??= (async () => openDatabase(await databaseUrlOnce(), { max: configOnce().PG_POOL_SIZE }))());

  const serviceOnce = (): Promise<ServiceContext> =>
    (service ??= (async () => {
      const { openContextOn } = await import('../context.js');
      return openContextOn(await poolOnce(), configOnce(), await databaseUrlOnce(), await logOnce());
    })());

  return {
    out,
    config: configOnce,
    pool: poolOnce,
    service: serviceOnce,
    async project(position: Position) {
      const ctx = await serviceOnce();
      if (!runtime) {
        const [{ ProjectorRuntime }, { allProjections }] = await Promise.all([
          import('../projector/runtime.js'),
          import('../../projections/index.js'),
        ]);
        runtime = new ProjectorRuntime({
          store: ctx.store,
          pool: ctx.pool,
          projections: allProjections(),
          log: await logOnce(),
          takeoverIntervalMs: 200,
          onCheckpoint: (name, at) => ctx.checkpoints.advance(name, at),
        });
        runtime.start();
      }
      await ctx.checkpoints.waitForCheckpoint(position, { timeoutMs: 30_000 });
    },
    close() {
      closing ??= closeAll();
      return closing;
    },
  };

  async function closeAll(): Promise<void> {
    // In reverse order of opening; each step only if it was opened. A failed open leaves nothing
    // to close on its own step (openDatabase and openContextOn clean up after themselves).
    try {
      await (runtime as ProjectorRuntime | null)?.stop();
      const ctx = service ? await service.catch(() => null) : null;
      if (ctx) {
        await ctx.checkpoints.stop();
        await ctx.store.close();
      }
      const openPool = pool ? await pool.catch(() => null) : null;
      await openPool?.end();
    } finally {
      if (databaseUrl) await databaseUrl.catch(() => undefined);
      await (embedded as EmbeddedPostgres | null)?.stop();
    }
  }
}
