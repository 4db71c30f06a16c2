import type pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { columnArrays, prepared } from '../../shared/db/prepared.js';
import { ACTOR_TYPES, SYSTEM_COMMAND_ACTOR, type CommandActor } from '../../shared/event-store/command-context.js';
import { AUDITED_EVENT_TYPES, auditFactOf, type AuditFact } from './actions.js';

/**
 * The audit log (migrations/read-model/400_audit.sql; docs/api.md "Audit log", docs/design.md "Who
 * did it: actor and request id"): one row per event of a command (./actions.ts), with who asked and the request id from
 * the event's metadata. What a row needs of the state before it (the `from` of an update, an
 * external key, a person's email and organizations) is kept in this projection's own table, so a
 * rebuild from the log gives the same rows, ids included.
 */

type Fields = Record<string, unknown>;
type Changes = Record<string, { from: unknown; to: unknown }>;

/** An actor as an event's metadata records it (shared/event-store/command-context.ts); null when absent or not one. */
export function actorOfMetadata(value: unknown): CommandActor | null {
  if (typeof value !== 'object' || value === null) return null;
  const { type, id, name } = value as Record<string, unknown>;
  if (!(ACTOR_TYPES as readonly unknown[]).includes(type)) return null;
  return { type: type as CommandActor['type'], id: typeof id === 'string' ? id : null, name: typeof name === 'string' ? name : null };
}

async function readState(tx: pg.PoolClient, orgId: number, resourceType: string, resourceId: string): Promise<Fields | null> {
  const { rows } = await tx.query<{ fields: Fields }>(
    prepared('SELECT fields FROM audit_resource_states WHERE org_id = $1 AND resource_type = $2 AND resource_id = $3', [orgId, resourceType, resourceId]),
  );
  return rows[0]?.fields ?? null;
}

async function writeState(tx: pg.PoolClient, orgId: number, resourceType: string, resourceId: string, fields: Fields): Promise<void> {
  await tx.query(
    prepared(
      `INSERT INTO audit_resource_states (org_id, resource_type, resource_id, fields) VALUES ($1, $2, $3, $4::jsonb)
       ON CONFLICT (org_id, resource_type, resource_id) DO UPDATE SET fields = EXCLUDED.fields`,
      [orgId, resourceType, resourceId, JSON.stringify(fields)],
    ),
  );
}

/** The resource's state after the fact, and the changes it made when it updated a state there was. */
async function applyState(tx: pg.PoolClient, orgId: number, fact: AuditFact): Promise<{ fields: Fields | null; changes: Changes | null }> {
  const change = fact.state;
  if (!change) return { fields: null, changes: null };
  switch (change.kind) {
    case 'set':
      await writeState(tx, orgId, fact.resourceType, fact.resourceId, change.fields);
      return { fields: change.fields, changes: null };
    case 'merge': {
      const before = await readState(tx, orgId, fact.resourceType, fact.resourceId);
      const fields = { ...before, ...change.fields };
      await writeState(tx, orgId, fact.resourceType, fact.resourceId, fields);
      if (!before) return { fields, changes: null };
      const changes: Changes = {};
      for (const [field, to] of Object.entries(change.fields)) changes[field] = { from: before[field] ?? null, to };
      return { fields, changes };
    }
    case 'forget':
      await tx.query(
        prepared('DELETE FROM audit_resource_states WHERE org_id = $1 AND resource_type = $2 AND resource_id = $3', [orgId, fact.resourceType, fact.resourceId]),
      );
      return { fields: null, changes: null };
  }
}

/**
 * The organizations whose log lists a person's own event: those they are a member of; before
 * their first membership (which a `users create` or an accepted invitation appends just after
 * their creation), org 0, from which that membership moves it; none once they have left every one.
 */
async function organizationsOf(tx: pg.PoolClient, userId: string): Promise<number[]> {
  const { rows } = await tx.query<{ org_id: number }>(
    prepared(`SELECT org_id FROM audit_resource_states WHERE resource_type = 'membership' AND resource_id = $1 AND org_id > 0 ORDER BY org_id`, [userId]),
  );
  if (rows.length > 0) return rows.map((r) => r.org_id);
  const user = await readState(tx, 0, 'user', userId);
  return user?.joined === true ? [] : [0];
}

async function applyEvent(tx: pg.PoolClient, event: RecordedEvent, fact: AuditFact): Promise<void> {
  const stateOrg = 'orgId' in fact.listedIn ? fact.listedIn.orgId : 0;
  const { fields, changes } = await applyState(tx, stateOrg, fact);

  const recorded = actorOfMetadata(event.metadata.actor) ?? fact.dataActor ?? SYSTEM_COMMAND_ACTOR;
  let actorName = recorded.name;
  if (recorded.type === 'user' && actorName === null && recorded.id !== null) {
    const user = await readState(tx, 0, 'user', recorded.id);
    actorName = typeof user?.email === 'string' ? user.email : null;
  }
  const requestId = typeof event.metadata.request_id === 'string' ? event.metadata.request_id : null;
  const key = fact.externalKey !== undefined ? fact.externalKey : fields?.external_key;
  const externalKey = typeof key === 'string' ? key : null;
  const orgs = 'orgId' in fact.listedIn ? [fact.listedIn.orgId] : await organizationsOf(tx, fact.listedIn.user);

  if (orgs.length > 0) {
    await tx.query(
      prepared(
        `INSERT INTO audit_events (org_id, id, seq, occurred_at, action, resource_type, resource_id, resource_external_key, actor_type, actor_id, actor_name, request_id, changes)
         SELECT o, $2, nextval('audit_event_seq'), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb FROM unnest($1::int[]) AS o
         ON CONFLICT (org_id, id) DO NOTHING`,
        [
          orgs,
          event.id,
          fact.occurredAt,
          fact.action,
          fact.resourceType,
          fact.resourceId,
          externalKey,
          recorded.type,
          recorded.id,
          actorName,
          requestId,
          changes === null ? null : JSON.stringify(changes),
        ],
      ),
    );
  }

  if (fact.joins) {
    // Their first membership: their own events so far (their creation) go to this organization.
    await tx.query(
      prepared(`UPDATE audit_events SET org_id = $2 WHERE org_id = 0 AND resource_type = 'user' AND resource_id = $1`, [fact.joins.user, fact.joins.orgId]),
    );
    await tx.query(
      prepared(`UPDATE audit_resource_states SET fields = fields || '{"joined": true}'::jsonb WHERE org_id = 0 AND resource_type = 'user' AND resource_id = $1`, [
        fact.joins.user,
      ]),
    );
  }
}

/** A fact that reads or writes state across organizations (a person's own event, a first membership): applied on its own. */
function alone(fact: AuditFact): boolean {
  return !('orgId' in fact.listedIn) || fact.joins !== undefined;
}

const stateKey = (orgId: number, resourceType: string, resourceId: string) => JSON.stringify([orgId, resourceType, resourceId]);

/**
 * A run of facts of one organization each, applied set-based (docs/benchmarks.md, "Import of
 * assets (issue 33)"): the states they read in one query, the facts in order against those kept
 * in memory, then the states they leave in one upsert and one delete and their rows in one insert,
 * whose sequence numbers are drawn in the facts' order. Gives the rows `applyEvent` gives one by one.
 */
async function applyRun(tx: pg.PoolClient, run: Array<{ event: RecordedEvent; fact: AuditFact }>): Promise<void> {
  if (run.length === 0) return;
  const wanted = new Map<string, [number, string, string]>();
  for (const { event, fact } of run) {
    const orgId = (fact.listedIn as { orgId: number }).orgId;
    if (fact.state?.kind === 'merge') wanted.set(stateKey(orgId, fact.resourceType, fact.resourceId), [orgId, fact.resourceType, fact.resourceId]);
    const recorded = actorOfMetadata(event.metadata.actor) ?? fact.dataActor ?? SYSTEM_COMMAND_ACTOR;
    if (recorded.type === 'user' && recorded.name === null && recorded.id !== null) wanted.set(stateKey(0, 'user', recorded.id), [0, 'user', recorded.id]);
  }
  /** Each state as the facts so far leave it: null once forgotten. */
  const states = new Map<string, Fields | null>();
  const changed = new Set<string>();
  if (wanted.size > 0) {
    const keys = [...wanted.values()];
    const { rows } = await tx.query<{ org_id: number; resource_type: string; resource_id: string; fields: Fields }>(
      prepared(
        `SELECT s.org_id, s.resource_type, s.resource_id, s.fields
           FROM audit_resource_states s
           JOIN unnest($1::int[], $2::text[], $3::text[]) AS w(org_id, resource_type, resource_id)
             ON s.org_id = w.org_id AND s.resource_type = w.resource_type AND s.resource_id = w.resource_id`,
        [keys.map((k) => k[0]), keys.map((k) => k[1]), keys.map((k) => k[2])],
      ),
    );
    for (const row of rows) states.set(stateKey(row.org_id, row.resource_type, row.resource_id), row.fields);
  }
  const stateOf = (key: string): Fields | null => states.get(key) ?? null;
  const rows: unknown[][] = [];
  for (const { event, fact } of run) {
    const orgId = (fact.listedIn as { orgId: number }).orgId;
    const key = stateKey(orgId, fact.resourceType, fact.resourceId);
    let fields: Fields | null = null;
    let changes: Changes | null = null;
    const change = fact.state;
    if (change?.kind === 'set') {
      fields = change.fields;
      states.set(key, fields);
      changed.add(key);
    } else if (change?.kind === 'merge') {
      const before = stateOf(key);
      fields = { ...before, ...change.fields };
      states.set(key, fields);
      changed.add(key);
      if (before) {
        changes = {};
        for (const [field, to] of Object.entries(change.fields)) changes[field] = { from: before[field] ?? null, to };
      }
    } else if (change?.kind === 'forget') {
      states.set(key, null);
      changed.add(key);
    }
    const recorded = actorOfMetadata(event.metadata.actor) ?? fact.dataActor ?? SYSTEM_COMMAND_ACTOR;
    let actorName = recorded.name;
    if (recorded.type === 'user' && actorName === null && recorded.id !== null) {
      const user = stateOf(stateKey(0, 'user', recorded.id));
      actorName = typeof user?.email === 'string' ? user.email : null;
    }
    const requestId = typeof event.metadata.request_id === 'string' ? event.metadata.request_id : null;
    const external = fact.externalKey !== undefined ? fact.externalKey : fields?.external_key;
    rows.push([
      orgId,
      event.id,
      fact.occurredAt,
      fact.action,
      fact.resourceType,
      fact.resourceId,
      typeof external === 'string' ? external : null,
      recorded.type,
      recorded.id,
      actorName,
      requestId,
      changes === null ? null : JSON.stringify(changes),
    ]);
  }
  const kept = [...changed].filter((key) => states.get(key) !== null).map((key) => [...(JSON.parse(key) as [number, string, string]), JSON.stringify(states.get(key))]);
  const forgotten = [...changed].filter((key) => states.get(key) === null).map((key) => JSON.parse(key) as [number, string, string]);
  if (kept.length > 0) {
    await tx.query(
      prepared(
        `INSERT INTO audit_resource_states (org_id, resource_type, resource_id, fields)
         SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::jsonb[])
         ON CONFLICT (org_id, resource_type, resource_id) DO UPDATE SET fields = EXCLUDED.fields`,
        columnArrays(kept, (k) => k),
      ),
    );
  }
  if (forgotten.length > 0) {
    await tx.query(
      prepared(
        `DELETE FROM audit_resource_states s USING unnest($1::int[], $2::text[], $3::text[]) AS f(org_id, resource_type, resource_id)
          WHERE s.org_id = f.org_id AND s.resource_type = f.resource_type AND s.resource_id = f.resource_id`,
        columnArrays(forgotten, (k) => k),
      ),
    );
  }
  // A function scan yields the arrays in order, and nextval is drawn row by row as it goes.
  await tx.query(
    prepared(
      `INSERT INTO audit_events (org_id, id, seq, occurred_at, action, resource_type, resource_id, resource_external_key, actor_type, actor_id, actor_name, request_id, changes)
       SELECT r.org_id, r.id, nextval('audit_event_seq'), r.occurred_at, r.action, r.resource_type, r.resource_id, r.external_key, r.actor_type, r.actor_id, r.actor_name, r.request_id, r.changes
         FROM unnest($1::int[], $2::uuid[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::jsonb[])
              AS r(org_id, id, occurred_at, action, resource_type, resource_id, external_key, actor_type, actor_id, actor_name, request_id, changes)
       ON CONFLICT (org_id, id) DO NOTHING`,
      columnArrays(rows, (r) => r),
    ),
  );
}

/** One event through the path of a fact applied on its own: what a set-based run must equal (test/properties/projection-batching.int.test.ts). */
export async function applyAuditEventAlone(tx: pg.PoolClient, event: RecordedEvent): Promise<void> {
  const fact = auditFactOf(event);
  if (fact) await applyEvent(tx, event, fact);
}

export const auditProjection: Projection = {
  name: 'audit',
  tables: ['audit_events', 'audit_resource_states'],
  sequences: ['audit_event_seq'],
  eventTypes: AUDITED_EVENT_TYPES,
  async apply(events: RecordedEvent[], tx: pg.PoolClient): Promise<void> {
    let run: Array<{ event: RecordedEvent; fact: AuditFact }> = [];
    for (const event of events) {
      const fact = auditFactOf(event);
      if (!fact) continue;
      if (!alone(fact)) {
        run.push({ event, fact });
        if (run.length >= 1000) {
          await applyRun(tx, run);
          run = [];
        }
        continue;
      }
      await applyRun(tx, run);
      run = [];
      await applyEvent(tx, event, fact);
    }
    await applyRun(tx, run);
  },
};
