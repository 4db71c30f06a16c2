import { describe, expect, it } from 'vitest';
import { buildCatalogue } from '../../shared/domain/catalogue.js';
import { InMemoryEventStore } from '../../shared/event-store/in-memory.js';
import { InvalidEventError, WrongExpectedRevisionError } from '../../shared/event-store/port.js';
import { rejectionOf } from '../support/rejection.js';
import { eventStoreConformance, testEvent, uniqueStream } from './conformance.js';

// The in-memory store keeps every promise of the port, as the Postgres and KurrentDB adapters
// do: the command handlers' unit tests (shared/domain/*/commands.unit.test.ts) run on it.
eventStoreConformance('in-memory', async () => {
  const store = new InMemoryEventStore();
  return { store, cleanup: () => store.close() };
});

describe('in-memory event store', () => {
  it('validates events against the catalogue it is given, and writes nothing of a refused append', async () => {
    const store = new InMemoryEventStore({ catalogue: buildCatalogue() });
    const error = await rejectionOf(store.appendToStream(uniqueStream('invalid'), [testEvent(1)]));
    expect(error).toBeInstanceOf(InvalidEventError);
    expect(await store.readAll()).toEqual([]);
  });

  it('runs a hook before the next append is checked, once: another writer wins the race there', async () => {
    const store = new InMemoryEventStore();
    const stream = uniqueStream('race');
    store.beforeNextAppend(() => store.appendToStream(stream, [testEvent(1)], 'no_stream').then(() => undefined));
    const error = await rejectionOf(store.appendToStream(stream, [testEvent(2)], 'no_stream'));
    expect(error).toBeInstanceOf(WrongExpectedRevisionError);
    expect(error).toMatchObject({ streamId: stream, expected: 'no_stream', actual: 0n });
    await store.appendToStream(stream, [testEvent(3)], 0n);
    expect((await store.readStream(stream)).map((e) => e.data.n)).toEqual([1, 3]);
  });
});
