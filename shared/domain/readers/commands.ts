import { refuse } from '../refusal.js';
import type { CommandPort } from '../port.js';
import { fieldErrors } from '../../errors.js';
import type { ExpectedRevision, Position } from '../../event-store/port.js';
import type { AppendedStream } from '../../projection/checkpoints.js';
import { executeCommand, loadStream } from '../command.js';
import { readerDecider, type ReaderCommand, type ReaderState } from './decider.js';
import { readerEvents, readerStream } from './events.js';

async function loadReader(ctx: CommandPort, readerId: string): Promise<{ state: ReaderState; revision: ExpectedRevision }> {
  const { state, expectedRevision } = await loadStream(ctx, readerStream(readerId), readerDecider, readerEvents);
  return { state, revision: expectedRevision };
}

export interface ReaderCommandOptions {
  /** How the CLI makes the change visible, told the streams appended (see executeCommand). */
  project?: (position: Position, streams: readonly AppendedStream[]) => Promise<void>;
}

async function run(ctx: CommandPort, readerId: string, command: (state: ReaderState) => Promise<ReaderCommand>, options: ReaderCommandOptions): Promise<ReaderState> {
  const { result } = await executeCommand(ctx, async () => {
    const { state, revision } = await loadReader(ctx, readerId);
    const events = readerDecider.decide(await command(state), state);
    const next = events.reduce(readerDecider.evolve, state);
    return { appends: [{ streamId: readerStream(readerId), expectedRevision: revision, events }], result: next };
  }, { project: options.project });
  return result;
}

function checkName(field: string, value: string): void {
  // The same rule as every other identifier text: 1..255, no C0 controls or DEL.
  if (value.length === 0 || value.length > 255 || /[\x00-\x1F\x7F]/.test(value)) {
    throw refuse.invalid([fieldErrors.invalidValue(field, `${field} must be 1 to 255 characters without control characters`)]);
  }
}

export async function registerReader(ctx: CommandPort, orgId: number, readerId: string, options: ReaderCommandOptions = {}): Promise<{ reader_id: string; org_id: number; registered_at: string }> {
  checkName('reader', readerId);
  const state = await run(ctx, readerId, async () => ({ type: 'RegisterReader', orgId, readerId, at: new Date().toISOString() }), options);
  return { reader_id: readerId, org_id: orgId, registered_at: state.registeredAt! };
}

/** The location of a scan point: by its external key (the CLI's `--location`) or its id (the web application may send either). */
export type ScanPointLocation = { locationExternalKey: string } | { locationId: number };

export async function assignScanPoint(
  ctx: CommandPort,
  input: { orgId: number; readerId: string; capturePoint: string } & ScanPointLocation,
  options: ReaderCommandOptions = {},
): Promise<{ reader_id: string; capture_point: string; location_id: number; location_external_key: string }> {
  checkName('capture-point', input.capturePoint);
  let location = { id: 0, externalKey: '' };
  await run(ctx, input.readerId, async (state) => {
    // Whose reader it is decides first; then where the point goes.
    if (state.orgId !== input.orgId) return { type: 'AssignScanPoint', orgId: input.orgId, readerId: input.readerId, capturePoint: input.capturePoint, locationId: 0, at: '' };
    const by = 'locationId' in input ? { id: input.locationId } : { externalKey: input.locationExternalKey };
    const node = await ctx.readModels.findExistingLocation(input.orgId, by);
    if (!node) {
      const named = 'id' in by ? `id ${by.id}` : `external_key ${by.externalKey}`;
      throw refuse.invalid([fieldErrors.fkNotFound('location', `no live location with ${named} in organization ${input.orgId}`)]);
    }
    location = node;
    return { type: 'AssignScanPoint', orgId: input.orgId, readerId: input.readerId, capturePoint: input.capturePoint, locationId: node.id, at: new Date().toISOString() };
  }, options);
  return { reader_id: input.readerId, capture_point: input.capturePoint, location_id: location.id, location_external_key: location.externalKey };
}

export async function unassignScanPoint(
  ctx: CommandPort,
  input: { orgId: number; readerId: string; capturePoint: string },
  options: ReaderCommandOptions = {},
): Promise<{ reader_id: string; capture_point: string }> {
  await run(ctx, input.readerId, async () => ({ type: 'UnassignScanPoint', orgId: input.orgId, readerId: input.readerId, capturePoint: input.capturePoint, at: new Date().toISOString() }), options);
  return { reader_id: input.readerId, capture_point: input.capturePoint };
}
