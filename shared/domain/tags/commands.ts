import type { ExpectedRevision, StreamAppend } from '../../event-store/port.js';
import type { CommandPort } from '../port.js';
import { executeCommand, loadStream } from '../command.js';
import { assetEvents, assetStream } from '../assets/events.js';
import { locationEvents, locationStream } from '../locations/events.js';
import { claim, createReservation, release, type Reservation } from '../reservations.js';
import { ownerNotFound, tagDecider, tagReservationValue, type TagInput, type TagOwnerEvent, type TagOwnerRef, type TagOwnerState, type TagRequest } from './decider.js';
import { tagEvents } from './events.js';
import type { TagBody } from './schema.js';

/**
 * The I/O around the tag decisions: the tag sub-resource's commands, and what the asset and
 * location commands need to attach embedded tags and retire tags in their own atomic appends.
 */

export function ownerStream(owner: TagOwnerRef): string {
  return owner.ownerType === 'asset' ? assetStream(owner.orgId, owner.ownerId) : locationStream(owner.orgId, owner.ownerId);
}

const OWNER_STREAM_EVENTS = [...assetEvents, ...locationEvents, ...tagEvents];

function loadTagOwner(ctx: CommandPort, owner: TagOwnerRef): Promise<{ state: TagOwnerState; expectedRevision: ExpectedRevision }> {
  return loadStream(ctx, ownerStream(owner), tagDecider, OWNER_STREAM_EVENTS);
}

/** For the tag reads: a 404 unless the owner exists in this org. */
export async function requireExistingTagOwner(ctx: CommandPort, owner: TagOwnerRef): Promise<void> {
  const { state } = await loadTagOwner(ctx, owner);
  if (state.status !== 'existing') throw ownerNotFound(owner);
}

export function tagInput(body: TagBody): TagInput {
  return {
    tag_type: body.tag_type,
    value: body.value,
    is_active: body.is_active ?? true,
    valid_from: body.valid_from ?? null,
    valid_to: body.valid_to ?? null,
  };
}

/** Tags to attach as a decision takes them, and the reservations to claim when it accepts them. */
export interface TagsToAttach {
  requests: TagRequest[];
  reservations: Reservation[];
}

/**
 * What a decision to attach `bodies` needs to know: a fresh tag id each, and who holds each value
 * in the org now (its `tag` reservation, with the holder's key for the 409's message). The ids
 * come from one statement. Like a create's key, the values are assumed never claimed on a
 * command's first attempt, so the common case reads no reservation: a value that is held, or was
 * released, fails that append on its reservation's revision, and the retry reads the reservations
 * (concurrently, one read per distinct value). Either way the round trips do not grow with the
 * number of tags. Call inside an executeCommand attempt, with its number.
 */
export async function readTagsToAttach(ctx: CommandPort, orgId: number, bodies: readonly TagBody[], attempt: number): Promise<TagsToAttach> {
  if (bodies.length === 0) return { requests: [], reservations: [] };
  const inputs = bodies.map(tagInput);
  const values = inputs.map((input) => tagReservationValue(input.tag_type, input.value));
  const distinct = [...new Set(values)];
  const [tagIds, read] = await Promise.all([
    ctx.ids.nextIds('tag_ids', inputs.length),
    Promise.all(distinct.map((value) => createReservation(ctx.store, attempt, 'tag', orgId, value))),
  ]);
  const byValue = new Map(read.map((r) => [r.value, r]));
  const reservations = values.map((value) => byValue.get(value)!);
  const requests = await Promise.all(
    inputs.map(async (input, i) => {
      const holder = reservations[i]!.holder;
      const heldBy = holder ? { ...holder, externalKey: await holderKey(ctx, orgId, holder) } : null;
      return { tagId: tagIds[i]!, input, heldBy };
    }),
  );
  return { requests, reservations };
}

async function holderKey(ctx: CommandPort, orgId: number, holder: { ownerType: string; ownerId: number }): Promise<string | null> {
  if (holder.ownerType !== 'asset' && holder.ownerType !== 'location') return null;
  return ctx.readModels.findExternalKey(orgId, holder.ownerType, holder.ownerId).catch(() => null);
}

/** The claims of the values of accepted tags, to append atomically with their TagAttached events. */
export function tagClaims(tags: TagsToAttach, owner: TagOwnerRef, at: string): StreamAppend[] {
  return tags.reservations.map((r) => claim(r, { ownerType: owner.ownerType, ownerId: owner.ownerId }, at));
}

/** The releases of the values of detached (or retired) tags, from the decided TagDetached events. */
export function tagReleases(owner: TagOwnerRef, events: readonly TagOwnerEvent[], at: string): StreamAppend[] {
  const holder = { ownerType: owner.ownerType, ownerId: owner.ownerId };
  return events.flatMap((e) => (e.type === 'TagDetached' ? [release('tag', owner.orgId, tagReservationValue(e.data.tag_type, e.data.value), holder, at)] : []));
}

/** POST /{owner}/{id}/tags: attaches one tag; answers its id. */
export async function attachTag(ctx: CommandPort, owner: TagOwnerRef, body: TagBody): Promise<number> {
  const at = new Date().toISOString();
  const { result } = await executeCommand(ctx, async (attempt) => {
    const [{ state, expectedRevision }, tags] = await Promise.all([loadTagOwner(ctx, owner), readTagsToAttach(ctx, owner.orgId, [body], attempt)]);
    const events = tagDecider.decide({ type: 'AttachTag', owner, tag: tags.requests[0]!, at }, state);
    return {
      appends: [{ streamId: ownerStream(owner), expectedRevision, events }, ...tagClaims(tags, owner, at)],
      result: tags.requests[0]!.tagId,
    };
  });
  return result;
}

/** DELETE /{owner}/{id}/tags/{tag_id}: detaches the tag and frees its value. */
export async function detachTag(ctx: CommandPort, owner: TagOwnerRef, tagId: number): Promise<void> {
  const at = new Date().toISOString();
  await executeCommand(ctx, async () => {
    const { state, expectedRevision } = await loadTagOwner(ctx, owner);
    const events = tagDecider.decide({ type: 'DetachTag', owner, tagId, at }, state);
    return { appends: [{ streamId: ownerStream(owner), expectedRevision, events }, ...tagReleases(owner, events, at)], result: undefined };
  });
}
