import type { CommandPort, IdSequence, MintedKeyResource } from './port.js';
import { createReservation, type Reservation, type ReservationKind } from './reservations.js';

/**
 * A create's surrogate id and external_key, for assets and locations alike. The id is drawn once;
 * the key is the caller's, or auto-minted when the body has none (`ASSET-0001`, `LOC-0001`),
 * skipping numbers a caller already took by hand. Whether the caller's key is taken is the
 * decider's to refuse: the reservation carries its holder.
 */

const RESOURCES: Record<MintedKeyResource, { sequence: IdSequence; kind: ReservationKind }> = {
  asset: { sequence: 'asset_ids', kind: 'asset-key' },
  location: { sequence: 'location_ids', kind: 'location-key' },
};

export interface NewEntity {
  id: number;
  /** The key's reservation for this attempt of the command (see createReservation). */
  keyReservation(attempt: number): Promise<Reservation>;
}

export async function newEntity(
  ctx: Pick<CommandPort, 'store' | 'ids'>,
  resource: MintedKeyResource,
  orgId: number,
  requestedKey: string | undefined,
): Promise<NewEntity> {
  const { sequence, kind } = RESOURCES[resource];
  // Without a key, the id and the first minted candidate come in one round trip.
  const allocated =
    requestedKey === undefined
      ? await ctx.ids.nextIdAndKeyNumber(sequence, orgId, resource).then(({ id, keyNumber }) => ({ id, mintedKey: mintedKey(resource, keyNumber) }))
      : { id: await ctx.ids.nextId(sequence), mintedKey: null };
  let minted: string | null = allocated.mintedKey;
  return {
    id: allocated.id,
    async keyReservation(attempt) {
      if (requestedKey !== undefined) return createReservation(ctx.store, attempt, kind, orgId, requestedKey);
      for (;;) {
        // The caller claims the candidate like any key, and asks again if a caller-supplied key holds it.
        minted ??= mintedKey(resource, await ctx.ids.nextKeyNumber(orgId, resource));
        const reservation = await createReservation(ctx.store, attempt, kind, orgId, minted);
        if (!reservation.holder) return reservation;
        minted = null;
      }
    },
  };
}

/** The auto-minted external_key of a number: `ASSET-0001`, `LOC-0001`. */
export function mintedKey(resource: MintedKeyResource, value: number): string {
  return `${resource === 'asset' ? 'ASSET' : 'LOC'}-${String(value).padStart(4, '0')}`;
}
