import {
  AccessDeniedError,
  DeadlineExceededError,
  UnavailableError,
  WrongExpectedVersionError,
  type RecordedEvent as ClientRecordedEvent,
} from '@kurrent/kurrentdb-client';
import { describe, expect, it } from 'vitest';
import {
  METADATA_PROPERTY,
  UnsupportedServerError,
  checkServerVersion,
  decodeMetadata,
  encodeMetadata,
  eventTypesRegex,
  isSystemEvent,
  laterOf,
  parseServerVersion,
  satisfies,
  serverFilter,
  toActualRevision,
  toClientEvent,
  toClientPosition,
  toRecordedEvent,
  toStreamState,
  translateError,
} from '../../shared/event-store/kurrentdb-translation.js';
import { EventStoreUnavailableError, START, WrongExpectedRevisionError, type ExpectedRevision } from '../../shared/event-store/port.js';

// What the KurrentDB adapter decides without a server. Its behaviour against one is the
// conformance suite (kurrentdb.int.test.ts, when KURRENTDB_URL is set).

describe('server version', () => {
  it.each([
    ['25.1.0', { major: 25, minor: 1, patch: 0 }],
    ['25.1.2.1234', { major: 25, minor: 1, patch: 2 }],
    ['v26.0.0-rc.1', { major: 26, minor: 0, patch: 0 }],
    ['24.10', { major: 24, minor: 10, patch: 0 }],
    [' 25.1.0 ', { major: 25, minor: 1, patch: 0 }],
  ])('reads %j', (text, version) => {
    expect(parseServerVersion(text)).toEqual(version);
  });

  it.each(['unknown', '', 'latest', '25'])('cannot read %j', (text) => {
    expect(parseServerVersion(text)).toBeNull();
  });

  it.each(['25.1.0', '25.1.3.100', '25.2.0', '26.0.0', '100.0.0'])('accepts %s (atomic multi-stream appends)', (text) => {
    expect(() => checkServerVersion(text)).not.toThrow();
  });

  it.each(['25.0.9', '24.10.5', '23.10.0', '5.0.0', '0.0.0.0'])('refuses %s in one line that names it and the minimum', (text) => {
    let error: unknown;
    try {
      checkServerVersion(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(UnsupportedServerError);
    expect((error as UnsupportedServerError).found).toBe(text);
    expect((error as Error).message).toBe(`the server runs KurrentDB ${text}; KurrentDB 25.1 or later is required (atomic multi-stream appends)`);
  });

  it.each(['unknown', ''])('refuses a server that reports no version (%j)', (text) => {
    expect(() => checkServerVersion(text)).toThrow('the server does not report its version; KurrentDB 25.1 or later is required');
  });
});

describe('expected and actual revisions', () => {
  it.each<[ExpectedRevision, unknown]>([
    ['any', 'any'],
    ['no_stream', 'no_stream'],
    ['stream_exists', 'stream_exists'],
    [0n, 0n],
    [41n, 41n],
  ])('passes %s to the client as %s', (expected, state) => {
    expect(toStreamState(expected)).toBe(state);
  });

  it('refuses a negative revision (the client would read it as one of its special states)', () => {
    expect(() => toStreamState(-1n)).toThrow(RangeError);
  });

  it.each<[bigint | 'no_stream' | undefined, bigint | 'no_stream']>([
    [undefined, 'no_stream'],
    ['no_stream', 'no_stream'],
    [-1n, 'no_stream'],
    [-5n, 'no_stream'],
    [-6n, 'no_stream'],
    [0n, 0n],
    [7n, 7n],
  ])('reads the actual revision %s as %s', (actual, revision) => {
    expect(toActualRevision(actual)).toBe(revision);
  });

  it.each<[ExpectedRevision, bigint | 'no_stream', boolean]>([
    ['any', 'no_stream', true],
    ['any', 3n, true],
    ['no_stream', 'no_stream', true],
    ['no_stream', 0n, false],
    ['stream_exists', 'no_stream', false],
    ['stream_exists', 0n, true],
    [2n, 2n, true],
    [2n, 3n, false],
    [0n, 'no_stream', false],
  ])('%s is satisfied by a stream at %s: %s', (expected, current, holds) => {
    expect(satisfies(expected, current)).toBe(holds);
  });
});

describe('positions', () => {
  it('reads from the client start for the start of the log, else from the position itself', () => {
    expect(toClientPosition(START)).toBe('start');
    expect(toClientPosition({ commit: 1200n, prepare: 1350n })).toEqual({ commit: 1200n, prepare: 1350n });
  });

  it('laterOf compares both parts', () => {
    expect(laterOf({ commit: 5n, prepare: 9n }, { commit: 6n, prepare: 1n })).toEqual({ commit: 6n, prepare: 1n });
    expect(laterOf({ commit: 6n, prepare: 7n }, { commit: 6n, prepare: 2n })).toEqual({ commit: 6n, prepare: 7n });
  });
});

describe('server-side filters', () => {
  it('event types: exactly those, escaped', () => {
    const regex = eventTypesRegex(['AssetCreated', 'TagAttached']);
    expect(regex).toBe('^(?:AssetCreated|TagAttached)$');
    const re = new RegExp(regex);
    expect(['AssetCreated', 'TagAttached'].every((t) => re.test(t))).toBe(true);
    expect(['AssetCreatedV2', 'XAssetCreated', 'Asset', '$metadata'].some((t) => re.test(t))).toBe(false);

    const odd = new RegExp(eventTypesRegex(['a.b$c', 'x|y', 'with space']));
    expect(odd.test('a.b$c') && odd.test('x|y') && odd.test('with space')).toBe(true);
    expect(odd.test('aXb$c') || odd.test('x') || odd.test('y')).toBe(false);
  });

  it('no types: a filter that matches nothing', () => {
    const re = new RegExp(eventTypesRegex([]));
    expect(['', 'AssetCreated', '$metadata'].some((t) => re.test(t))).toBe(false);
  });

  it('without a filter: every event but the server own ($ types)', () => {
    expect(serverFilter(undefined)).toMatchObject({ filterOn: 'eventType', regex: '^[^$].*', checkpointInterval: 1 });
  });

  it('by type, or by stream prefix, with a checkpoint every window of events looked at', () => {
    expect(serverFilter({ eventTypes: ['ScansRecorded'] })).toMatchObject({
      filterOn: 'eventType',
      regex: '^(?:ScansRecorded)$',
      checkpointInterval: 1,
    });
    expect(serverFilter({ streamPrefixes: ['asset-1-', 'location-1-'] })).toMatchObject({
      filterOn: 'streamName',
      prefixes: ['asset-1-', 'location-1-'],
      checkpointInterval: 1,
    });
    expect(serverFilter({ streamPrefixes: [] })).toMatchObject({ filterOn: 'streamName', regex: '(?!)' });
  });

  it('system events are those of a $ type', () => {
    expect(isSystemEvent({ type: '$metadata' })).toBe(true);
    expect(isSystemEvent({ type: '$>' })).toBe(true);
    expect(isSystemEvent({ type: 'AssetCreated' })).toBe(false);
  });
});

describe('event contents', () => {
  const metadata = { schema_version: 2, source: 'api', nested: { list: [1, 'two', null, true] }, none: null };

  it('metadata travels as one string property (all the multi-stream append accepts) and reads back exactly', () => {
    const encoded = encodeMetadata(metadata);
    expect(Object.keys(encoded)).toEqual([METADATA_PROPERTY]);
    expect(Object.values(encoded).every((v) => typeof v === 'string')).toBe(true);
    expect(decodeMetadata(encoded)).toEqual(metadata);
    // As the server hands it back: the JSON object of the properties, possibly with its own beside.
    expect(decodeMetadata({ ...JSON.parse(JSON.stringify(encoded)), '$schema.format': 'Json' })).toEqual(metadata);
    expect(decodeMetadata(encodeMetadata(undefined))).toEqual({});
  });

  it('metadata written by another program: a JSON object as it is, anything else empty', () => {
    expect(decodeMetadata({ $correlationId: 'abc', by: 'other' })).toEqual({ $correlationId: 'abc', by: 'other' });
    expect(decodeMetadata(undefined)).toEqual({});
    expect(decodeMetadata(new Uint8Array([1, 2, 3]))).toEqual({});
    expect(decodeMetadata([1, 2])).toEqual({});
    expect(decodeMetadata('text')).toEqual({});
    expect(decodeMetadata({ [METADATA_PROPERTY]: 'not json' })).toEqual({});
    expect(decodeMetadata({ [METADATA_PROPERTY]: '[1,2]' })).toEqual({});
  });

  it('an event to append: JSON, with its id, type, data and encoded metadata', () => {
    const event = toClientEvent({ id: '0b7e1c1e-6c1d-4f7e-9d1e-2b3c4d5e6f70', type: 'AssetCreated', data: { asset_id: 1 }, metadata });
    expect(event).toEqual({
      id: '0b7e1c1e-6c1d-4f7e-9d1e-2b3c4d5e6f70',
      contentType: 'application/json',
      type: 'AssetCreated',
      data: { asset_id: 1 },
      metadata: encodeMetadata(metadata),
    });
  });

  const recorded = (overrides: Partial<Record<string, unknown>> = {}) =>
    ({
      streamId: 'asset-1-2',
      id: '0B7E1C1E-6C1D-4F7E-9D1E-2B3C4D5E6F70',
      isJson: true,
      revision: 3n,
      type: 'AssetRenamed',
      created: new Date('2026-05-25T14:38:11.176Z'),
      data: { name: 'pump' },
      metadata: encodeMetadata(metadata),
      position: { commit: 1000n, prepare: 1234n },
      ...overrides,
    }) as unknown as ClientRecordedEvent;

  it('a recorded event as the port gives it', () => {
    expect(toRecordedEvent(recorded())).toEqual({
      id: '0b7e1c1e-6c1d-4f7e-9d1e-2b3c4d5e6f70',
      type: 'AssetRenamed',
      data: { name: 'pump' },
      metadata,
      streamId: 'asset-1-2',
      revision: 3n,
      position: { commit: 1000n, prepare: 1234n },
      recordedAt: new Date('2026-05-25T14:38:11.176Z'),
    });
  });

  it('data that is not a JSON object reads as empty; an event without a position is refused', () => {
    expect(toRecordedEvent(recorded({ isJson: false, data: new Uint8Array([1]) })).data).toEqual({});
    expect(toRecordedEvent(recorded({ data: [1, 2] })).data).toEqual({});
    expect(() => toRecordedEvent(recorded({ position: undefined }))).toThrow(/without its log position/);
  });
});

describe('errors', () => {
  const expected = new Map<string, ExpectedRevision>([
    ['a', 'no_stream'],
    ['b', 5n],
  ]);

  it('a failed expectation (single-stream append) carries the caller expectation and the actual revision', () => {
    const error = translateError(new WrongExpectedVersionError(undefined, { streamName: 'a', expected: 'no_stream', current: 1n }), {
      operation: 'append',
      expected,
    });
    expect(error).toBeInstanceOf(WrongExpectedRevisionError);
    expect(error).toMatchObject({ streamId: 'a', expected: 'no_stream', actual: 1n });
  });

  it('a failed expectation of a multi-stream append names its stream; "-1" is no stream', () => {
    const conflict = WrongExpectedVersionError.fromRevisionConflict({ stream: 'b', expectedRevision: '5', actualRevision: '0' });
    expect(translateError(conflict, { operation: 'append', expected })).toMatchObject({ streamId: 'b', expected: 5n, actual: 0n });
    const missing = WrongExpectedVersionError.fromRevisionConflict({ stream: 'c', expectedRevision: '-4', actualRevision: '-1' });
    const error = translateError(missing, { operation: 'append', expected });
    expect(error).toBeInstanceOf(WrongExpectedRevisionError);
    // Not one of the caller's streams (it cannot happen): the expectation as the server reports it.
    expect(error).toMatchObject({ streamId: 'c', expected: 'stream_exists', actual: 'no_stream' });
  });

  it('an unreachable server, or no answer in time, is EventStoreUnavailableError (an append: whole or not at all)', () => {
    for (const cause of [new UnavailableError(), new DeadlineExceededError(), Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 })]) {
      const error = translateError(cause, { operation: 'append' });
      expect(error).toBeInstanceOf(EventStoreUnavailableError);
      expect((error as Error).message).toMatch(/written entirely or not at all; repeat it with the same event ids/);
      expect((error as Error).cause).toBe(cause);
      expect(translateError(cause, { operation: 'read' })).toBeInstanceOf(EventStoreUnavailableError);
    }
  });

  it('anything else is passed on as it is', () => {
    const denied = new AccessDeniedError();
    expect(translateError(denied, { operation: 'append' })).toBe(denied);
    const invalid = Object.assign(new Error('3 INVALID_ARGUMENT'), { code: 3 });
    expect(translateError(invalid, { operation: 'read' })).toBe(invalid);
    const ours = new WrongExpectedRevisionError('s', 'any', 1n);
    expect(translateError(ours, { operation: 'append' })).toBe(ours);
    expect(translateError(null, { operation: 'read' })).toBeNull();
  });
});
