import { describe, expect, it } from 'vitest';
import { buildCatalogue } from '../../shared/domain/catalogue.js';
import { InMemoryEventStore } from '../../shared/event-store/in-memory.js';
import { CLI_COMMAND_ACTOR, outsideCommandContext, runInCommandContext } from '../../shared/event-store/command-context.js';
import { principalActor } from '../../shared/http/command-actor.js';

/**
 * Who asked and the request id in every event a command appends (docs/design.md "Who did it: actor and request id"): the
 * context a pipeline sets is stamped on each event by the catalogue, whichever handler appends.
 */

const org = (n: number) => ({ type: 'OrgCreated', data: { org_id: n, name: `org ${n}`, created_at: '2026-05-25T14:38:11.440Z' } });
const actor = { type: 'api_key', id: 'ak_1', name: 'partner' } as const;

describe('the command context', () => {
  it('every event appended inside records the actor and the request id, beside its schema version', async () => {
    const store = new InMemoryEventStore({ catalogue: buildCatalogue() });
    await runInCommandContext({ actor, requestId: 'req-1' }, async () => {
      await store.appendToStream('org-1', [org(1)]);
      // Later in the same flow, after other awaits, still the same context.
      await new Promise((resolve) => setTimeout(resolve, 1));
      await store.appendToStreams([{ streamId: 'org-2', events: [org(2)], expectedRevision: 'no_stream' }]);
    });
    const metadata = (await store.readAll()).map((e) => e.metadata);
    expect(metadata).toEqual([
      { actor, request_id: 'req-1', schema_version: 1 },
      { actor, request_id: 'req-1', schema_version: 1 },
    ]);
  });

  it('outside one, or inside outsideCommandContext (scans), nothing but the schema version; nobody signed in: the request id alone', async () => {
    const store = new InMemoryEventStore({ catalogue: buildCatalogue() });
    await store.appendToStream('org-1', [org(1)]);
    await runInCommandContext({ actor: CLI_COMMAND_ACTOR, requestId: 'req-2' }, () => outsideCommandContext(() => store.appendToStream('org-2', [org(2)])));
    await runInCommandContext({ actor: null, requestId: 'req-3' }, () => store.appendToStream('org-3', [org(3)]));
    expect((await store.readAll()).map((e) => e.metadata)).toEqual([{ schema_version: 1 }, { schema_version: 1 }, { request_id: 'req-3', schema_version: 1 }]);
  });

  it('concurrent contexts do not mix', async () => {
    const store = new InMemoryEventStore({ catalogue: buildCatalogue() });
    await Promise.all(
      [1, 2, 3, 4].map((n) =>
        runInCommandContext({ actor: { type: 'user', id: `usr_${n}`, name: `${n}@example.com` }, requestId: `req-${n}` }, async () => {
          await new Promise((resolve) => setTimeout(resolve, 5 - n));
          await store.appendToStream(`org-${n}`, [org(n)]);
        }),
      ),
    );
    for (const event of await store.readAll()) {
      const n = event.data.org_id as number;
      expect(event.metadata).toMatchObject({ actor: { id: `usr_${n}` }, request_id: `req-${n}` });
    }
  });

  it("a principal as the actor of the public API's commands: an API key by id and name, a person by user id (else email) and email", () => {
    expect(principalActor({ kind: 'api_key', orgId: 1, scopes: [], keyId: 'ak_1', subject: 'ak_1', keyName: 'partner' })).toEqual(actor);
    expect(principalActor({ kind: 'session', orgId: 1, scopes: [], keyId: null, subject: 'ada@example.com', userId: 'usr_1' })).toEqual({ type: 'user', id: 'usr_1', name: 'ada@example.com' });
    expect(principalActor({ kind: 'session', orgId: 1, scopes: [], keyId: null, subject: 'ada@example.com', userId: null })).toEqual({ type: 'user', id: 'ada@example.com', name: 'ada@example.com' });
  });
});
