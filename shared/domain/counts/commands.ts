import type { CommandPort } from '../port.js';
import { executeCommand, loadStream, waitForStream } from '../command.js';
import { countDecider, type ZoneLookup } from './decider.js';
import { countEvents, countStream } from './events.js';
import type { StartCountBody, ZoneRef } from './schema.js';

/**
 * Count command handlers (docs/api.md "Counts"): read what the decision needs (the zone's
 * location), decide on the count's own stream, append (executeCommand waits for the projections,
 * so the caller's next read sees the count).
 */

async function lookUpZone(ctx: CommandPort, orgId: number, ref: ZoneRef): Promise<ZoneLookup> {
  const by = ref.field === 'location_id' ? { id: ref.id } : { externalKey: ref.externalKey };
  const found = await ctx.readModels.findExistingLocation(orgId, by);
  return { ref, found: found ? { id: found.id } : null };
}

/** POST /counts: a new count id (from its sequence), started now on the zone the body names. */
export async function startCount(ctx: CommandPort, orgId: number, body: StartCountBody): Promise<number> {
  const countId = await ctx.ids.nextId('count_ids');
  const streamId = countStream(orgId, countId);
  await executeCommand(ctx, async () => {
    const zone = await lookUpZone(ctx, orgId, body.zone);
    const { state, expectedRevision } = await loadStream(ctx, streamId, countDecider, countEvents);
    const events = countDecider.decide({ type: 'StartCount', orgId, countId, name: body.name, zone, at: new Date().toISOString() }, state);
    return { appends: [{ streamId, expectedRevision, events }], result: undefined };
  });
  return countId;
}

/**
 * POST /counts/{id}/close: `CountClosed` on the count's stream. When it is closed already (before,
 * or by a concurrent close that won the race) it appends nothing and waits until what is there is
 * projected, so every caller reads the same count afterwards.
 */
export async function closeCount(ctx: CommandPort, orgId: number, countId: number): Promise<void> {
  const streamId = countStream(orgId, countId);
  const { append } = await executeCommand(ctx, async () => {
    const { state, expectedRevision } = await loadStream(ctx, streamId, countDecider, countEvents);
    const events = countDecider.decide({ type: 'CloseCount', orgId, countId, at: new Date().toISOString() }, state);
    return { appends: [{ streamId, expectedRevision, events }], result: undefined };
  });
  if (!append) await waitForStream(ctx, streamId);
}
