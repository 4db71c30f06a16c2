/**
 * Translation between the event-store port and the KurrentDB client: expected revisions, positions,
 * filters, event contents, errors and the server version. Pure functions, so that everything the
 * adapter decides without a server is unit-tested without one (`kurrentdb.ts` does the I/O).
 */
import {
  ErrorType,
  WrongExpectedVersionError,
  eventTypeFilter,
  excludeSystemEvents,
  isCommandError,
  streamNameFilter,
  START as CLIENT_START,
  type AppendStreamState,
  type Filter,
  type JSONEventData,
  type Position as ClientPosition,
  type RecordedEvent as ClientRecordedEvent,
} from '@kurrent/kurrentdb-client';
import {
  EventStoreUnavailableError,
  START,
  WrongExpectedRevisionError,
  comparePositions,
  type ExpectedRevision,
  type JsonObject,
  type LogFilter,
  type Position,
  type RecordedEvent,
} from './port.js';

// ---------------------------------------------------------------------------------------------
// Server version

/** The first KurrentDB with atomic multi-stream appends (`multiStreamAppend`). */
export const MINIMUM_SERVER_VERSION = { major: 25, minor: 1 } as const;

export interface ServerVersion {
  major: number;
  minor: number;
  patch: number;
}

/** `25.1.0`, `25.1.2.1234`, `v26.0.0-rc.1` → its numbers; anything else (`unknown`, `""`) → null. */
export function parseServerVersion(text: string): ServerVersion | null {
  const match = /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(text.trim());
  if (!match) return null;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3] ?? 0) };
}

/** The server is older than MINIMUM_SERVER_VERSION, or does not say which it is. */
export class UnsupportedServerError extends Error {
  constructor(readonly found: string) {
    const runs = found.trim() === '' || found === 'unknown' ? 'does not report its version' : `runs KurrentDB ${found}`;
    const { major, minor } = MINIMUM_SERVER_VERSION;
    super(`the server ${runs}; KurrentDB ${major}.${minor} or later is required (atomic multi-stream appends)`);
    this.name = 'UnsupportedServerError';
  }
}

/** Throws UnsupportedServerError unless `reported` (as the server reports it) is recent enough. */
export function checkServerVersion(reported: string): ServerVersion {
  const version = parseServerVersion(reported);
  if (!version) throw new UnsupportedServerError(reported);
  const { major, minor } = MINIMUM_SERVER_VERSION;
  if (version.major < major || (version.major === major && version.minor < minor)) throw new UnsupportedServerError(reported);
  return version;
}

// ---------------------------------------------------------------------------------------------
// Expected and actual revisions

/** The port's expectation as the client's: the same words, and revisions as they are. */
export function toStreamState(expected: ExpectedRevision): AppendStreamState {
  if (typeof expected === 'bigint') {
    if (expected < 0n) throw new RangeError(`an expected revision is 0 or more, not ${expected}`);
    return expected;
  }
  return expected;
}

/** A stream's revision as the client reports it: negative numbers (-1 no stream; -5, -6 deleted) mean no stream. */
export function toActualRevision(actual: bigint | 'no_stream' | undefined): bigint | 'no_stream' {
  if (actual === undefined || actual === 'no_stream' || actual < 0n) return 'no_stream';
  return actual;
}

/** Whether a stream at `current` satisfies `expected` (checked by the adapter for streams an append does not write). */
export function satisfies(expected: ExpectedRevision, current: bigint | 'no_stream'): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return current === 'no_stream';
  if (expected === 'stream_exists') return current !== 'no_stream';
  return current === expected;
}

// ---------------------------------------------------------------------------------------------
// Positions

/** Where the client starts a read or a subscription: its START for the start of the log. */
export function toClientPosition(position: Position): ClientPosition | typeof CLIENT_START {
  return comparePositions(position, START) === 0 ? CLIENT_START : { commit: position.commit, prepare: position.prepare };
}

export function laterOf(a: Position, b: Position): Position {
  return comparePositions(a, b) >= 0 ? a : b;
}

// ---------------------------------------------------------------------------------------------
// Filters

/** `types` escaped for the server's (.NET) regular expressions. */
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\#\s]/g, (c) => (/\s/.test(c) ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : `\\${c}`));
}

/** Matches nothing (an empty list of types or prefixes). */
const NOTHING = '(?!)';

/** A regular expression matching exactly these event types. */
export function eventTypesRegex(types: readonly string[]): string {
  return types.length === 0 ? NOTHING : `^(?:${types.map(escapeRegex).join('|')})$`;
}

/**
 * The server-side filter of a subscription or read: the port's filter, or, without one, every
 * event but the server's own (types starting with `$`: stream metadata, statistics, links). The
 * server then sends a checkpoint every few windows of events it looked at (`checkpointInterval`).
 */
export function serverFilter(filter: LogFilter | undefined): Filter {
  if (!filter) return excludeSystemEvents();
  if ('eventTypes' in filter) return eventTypeFilter({ regex: eventTypesRegex(filter.eventTypes) });
  if (filter.streamPrefixes.length === 0) return streamNameFilter({ regex: NOTHING });
  return streamNameFilter({ prefixes: [...filter.streamPrefixes] });
}

/** Events of the server itself, never delivered to the service. */
export function isSystemEvent(event: { type: string }): boolean {
  return event.type.startsWith('$');
}

// ---------------------------------------------------------------------------------------------
// Event contents

/**
 * Metadata travels as one property holding its JSON text. The multi-stream append accepts only
 * string properties (KurrentDB stores them as the event's metadata object); one JSON text keeps
 * nested values, numbers and null exactly, and both append paths write it the same way.
 */
export const METADATA_PROPERTY = 'tracking-metadata';

export function encodeMetadata(metadata: JsonObject | undefined): Record<string, string> {
  return { [METADATA_PROPERTY]: JSON.stringify(metadata ?? {}) };
}

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/** The metadata an event was appended with; a plain JSON object written by another program as it is; else `{}`. */
export function decodeMetadata(raw: unknown): JsonObject {
  if (!isPlainObject(raw)) return {};
  const encoded = raw[METADATA_PROPERTY];
  if (typeof encoded !== 'string') return raw;
  try {
    const decoded: unknown = JSON.parse(encoded);
    return isPlainObject(decoded) ? decoded : {};
  } catch {
    return {};
  }
}

/** An event as the client appends it (JSON data, metadata as one property). */
export function toClientEvent(event: { id: string; type: string; data: JsonObject; metadata?: JsonObject }): JSONEventData {
  return { id: event.id, contentType: 'application/json', type: event.type, data: event.data, metadata: encodeMetadata(event.metadata) };
}

/** A recorded event as the port gives it. Every event of KurrentDB 22.6 or later carries its position. */
export function toRecordedEvent(event: ClientRecordedEvent): RecordedEvent {
  if (!event.position) throw new Error(`event ${event.id} of stream ${event.streamId} came without its log position`);
  return {
    id: event.id.toLowerCase(),
    type: event.type,
    data: isPlainObject(event.data) ? event.data : {},
    metadata: decodeMetadata(event.metadata),
    streamId: event.streamId,
    revision: event.revision,
    position: { commit: event.position.commit, prepare: event.position.prepare },
    recordedAt: event.created,
  };
}

// ---------------------------------------------------------------------------------------------
// Errors

/**
 * gRPC status codes of a server that could not be reached or did not answer in time (the client
 * passes some of them on untranslated): CANCELLED, DEADLINE_EXCEEDED, ABORTED (a write the server
 * timed out), INTERNAL, UNAVAILABLE, DATA_LOSS.
 */
const UNREACHABLE_STATUS = new Set([1, 4, 10, 13, 14, 15]);

const UNREACHABLE_TYPES = new Set<string>([
  ErrorType.UNAVAILABLE,
  ErrorType.DEADLINE_EXCEEDED,
  ErrorType.TIMEOUT,
  ErrorType.CANCELLED,
  ErrorType.NOT_LEADER,
]);

export interface ErrorContext {
  operation: 'append' | 'read' | 'connect';
  /** For an append: the expectation the caller gave each stream (the port's error carries it). */
  expected?: ReadonlyMap<string, ExpectedRevision>;
}

/** Whether a client error means the server was out of reach (rather than a refusal). */
export function isUnreachable(error: unknown): boolean {
  if (error instanceof Error && isCommandError(error)) return UNREACHABLE_TYPES.has(error.type);
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && UNREACHABLE_STATUS.has(code);
}

/**
 * A client error as the port's: a failed expectation is WrongExpectedRevisionError (with the
 * caller's expectation and the actual revision), an unreachable server EventStoreUnavailableError;
 * anything else is passed on as it is.
 */
export function translateError(error: unknown, context: ErrorContext): unknown {
  if (error instanceof WrongExpectedRevisionError || error instanceof EventStoreUnavailableError) return error;
  if (error instanceof WrongExpectedVersionError) {
    const streamId = error.streamName;
    const expected = context.expected?.get(streamId) ?? fromStreamState(error.expectedState);
    return new WrongExpectedRevisionError(streamId, expected, toActualRevision(error.actualState));
  }
  if (isUnreachable(error)) {
    const message =
      context.operation === 'append'
        ? 'KurrentDB did not confirm an append (unreachable, or no answer in time): it was written entirely or not at all; repeat it with the same event ids'
        : context.operation === 'connect'
          ? 'KurrentDB unreachable'
          : 'KurrentDB unreachable during a read';
    return new EventStoreUnavailableError(message, { cause: error });
  }
  return error;
}

/** The client's expectation as the port's (the client reports -1, -2, -4 for the words in some paths). */
function fromStreamState(state: AppendStreamState): ExpectedRevision {
  if (typeof state !== 'bigint') return state;
  if (state === -1n) return 'no_stream';
  if (state === -2n) return 'any';
  if (state === -4n) return 'stream_exists';
  return state;
}
