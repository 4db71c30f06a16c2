import { allProjections } from '../../projections/index.js';
import type { RoleFactory } from '../role.js';
import { ProjectorRuntime } from '../../shared/projection/runtime.js';
import { startAlertsTicker } from '../../projections/alerts/ticker.js';

/** Applies the log to the current read model: a follower per segment of each projection, one active instance of each across processes, under a lease. */
export const projectorRole: RoleFactory = (ctx) => {
  const runtime = new ProjectorRuntime({
    store: ctx.store,
    pool: ctx.pool,
    projections: allProjections(),
    log: ctx.log.child({ role: 'projector' }),
    segments: ctx.config.PROJECTION_SEGMENTS,
    leaseMs: ctx.config.PROJECTOR_LEASE_SECONDS * 1000,
    onCheckpoint: (name, position) => ctx.checkpoints.advance(name, position),
    onSetAside: (name, streamId, position) => ctx.checkpoints.setAsideChanged(name, streamId, position),
  });
  // Every process that runs the alerts subscriber's segments appends the clock ticks its time-based alerts wait for.
  let ticker: { stop: () => Promise<void> } | null = null;
  return {
    name: 'projector',
    async start() {
      runtime.start();
      ticker = startAlertsTicker({ store: ctx.store, pool: ctx.pool, log: ctx.log.child({ role: 'projector' }) });
    },
    async stop() {
      await ticker?.stop();
      await runtime.stop();
    },
    urls: () => ({}),
  };
};
