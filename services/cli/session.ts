import { loadConfig, type Config } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import type { ServiceContext } from '../../shared/service-context.js';
import type { KeyEncryption } from '../../shared/auth/key-encryption-source.js';
import { databaseTarget, type DatabaseTarget } from '../../shared/db/connections.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../shared/db/embedded.js';
import type { Pool } from '../../shared/db/pool.js';
import type { Position } from '../../shared/event-store/port.js';
import type { AppendedStream } from '../../shared/projection/checkpoints.js';
import type { Logger } from '../../shared/logger.js';
import type { ProjectorRuntime } from '../../shared/projection/runtime.js';
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
  let target: Promise<DatabaseTarget> | null = null;
  let prepared: Promise<{ pool: Pool; keyEncryption: KeyEncryption }> | null = null;
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

  // The connections of this installation: for the embedded default, its runtime, migration and
  // analyst roles (shared/db/database-roles.ts); with DATABASE_URL, the configured URLs.
  const targetOnce = (): Promise<DatabaseTarget> =>
    (target ??= (async () => {
      const current = configOnce();
      if (current.DATABASE_URL) return databaseTarget(current, null);
      embedded = await startEmbeddedPostgres({ dataDir: current.DATA_DIR, role: 'cli' });
      return databaseTarget(current, embedded);
    })());

  const preparedOnce = () =>
    (prepared ??= (async () => {
      const [{ openPool, prepareDatabase }, where, logger] = await Promise.all([import('../open-context.js'), targetOnce(), logOnce()]);
      // As the service does (services/open-context.ts); the logger censors the keys and the URLs' passwords.
      logger.debug({ config: configOnce(), database: where }, 'opening the service context');
      const pool = openPool(where, configOnce());
      try {
        return { pool, keyEncryption: await prepareDatabase(configOnce(), where, pool, logger) };
      } catch (error) {
        await pool.end().catch(() => undefined);
        throw error;
      }
    })());

  const poolOnce = async (): Promise<Pool> => (await preparedOnce()).pool;

  const serviceOnce = (): Promise<ServiceContext> =>
    (service ??= (async () => {
      const { openContextOn } = await import('../open-context.js');
      const { pool, keyEncryption } = await preparedOnce();
      return openContextOn(pool, configOnce(), await targetOnce(), keyEncryption, await logOnce());
    })());

  return {
    out,
    config: configOnce,
    pool: poolOnce,
    service: serviceOnce,
    async project(position: Position, streams?: readonly AppendedStream[]) {
      const ctx = await serviceOnce();
      if (!runtime) {
        const [{ ProjectorRuntime }, { allProjections }] = await Promise.all([
          import('../../shared/projection/runtime.js'),
          import('../../projections/index.js'),
        ]);
        runtime = new ProjectorRuntime({
          store: ctx.store,
          pool: ctx.pool,
          projections: allProjections(),
          log: await logOnce(),
          takeoverIntervalMs: 200,
          onCheckpoint: (name, at) => ctx.checkpoints.advance(name, at),
          onSetAside: (name, streamId, at) => ctx.checkpoints.setAsideChanged(name, streamId, at),
        });
        runtime.start();
      }
      // With the streams the command appended: one a projection set aside fails the command at once.
      await ctx.checkpoints.waitForCheckpoint(position, { timeoutMs: 30_000, streams });
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
      const opened = prepared ? await prepared.catch(() => null) : null;
      await opened?.pool.end();
    } finally {
      if (target) await target.catch(() => undefined);
      await (embedded as EmbeddedPostgres | null)?.stop();
    }
  }
}
