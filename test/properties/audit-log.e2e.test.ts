import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProjections } from '../../projections/index.js';
import { rebuildProjections, selectProjections } from '../../shared/projection/rebuild.js';
import { CLI_ACTOR } from '../../shared/domain/actor.js';
import { acceptInvitation, createUser, inviteUser, setPasswordWithSetupLink } from '../../shared/domain/people/commands.js';
import { bearer, createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { AppClient, tokenOf, type Json } from '../people/app-client.js';
import { wholeAuditLog, type AuditEntry } from '../audit/support.js';

/**
 * The audit log lists every command once, with who asked and the request id (docs/api.md "Audit
 * log"), and a rebuild gives the same list (docs/design.md "Who did it: actor and request id"). Each run is an
 * organization of its own; a random sequence of commands (assets and locations created, updated,
 * moved and deleted, tags attached and detached, API keys minted and revoked) is sent by random
 * actors (two API keys, a person's session token on /api/v1, the same person signed in to the
 * console), imports of assets (a row creating one, a row renaming one: each row a command with
 * the importer as actor and the POST's request id), in groups whose commands run at once (real parallel HTTP requests) when they touch
 * different resources. Each request carries our own X-Request-ID. Then the organization's audit
 * log holds exactly one entry per command, with its action, resource, actor, request id and, for
 * updates and moves, the changes from the state the sequence left; beside them only the entries of
 * the run's setup. Then `projections rebuild audit` and the list, ids included, is the same.
 *
 * Reproduce: PROPERTY_SEED=<seed> PROPERTY_RUNS=<n> npx vitest run test/properties/audit-log.e2e.test.ts
 */

const SEED = Number(process.env.PROPERTY_SEED ?? 20261126);
const RUNS = Number(process.env.PROPERTY_RUNS ?? 8);
const PASSWORD = 'correct horse battery';
const ADA = 'ada.audit@example.com';

let svc: TestService;
let adaId: string;

beforeAll(async () => {
  svc = await startTestService('audit_property', { RATE_LIMIT_PER_MINUTE: '1000000', RATE_LIMIT_BURST: '1000000' });
  const { ctx } = svc.service;
  const home = await createOrg(ctx, 'audit home');
  const created = await createUser(ctx, { email: ADA, orgId: home.id, role: 'admin', by: CLI_ACTOR, publicUrl: 'http://localhost' });
  await setPasswordWithSetupLink(ctx, { token: tokenOf(created.setup_url), password: PASSWORD });
  adaId = created.id;
}, 120_000);
afterAll(async () => {
  await svc?.stop();
});

// ---- the commands, planned against a model of the organization -------------------------------

const KINDS = ['createAsset', 'updateAsset', 'deleteAsset', 'attachTag', 'detachTag', 'createLocation', 'updateLocation', 'moveLocation', 'deleteLocation', 'mintKey', 'revokeKey', 'importAssets'] as const;
type Kind = (typeof KINDS)[number];

interface Op {
  kind: Kind;
  pick: number;
  target: number;
  actor: number;
  /** Starts a new group of concurrent commands even when it could join the last one. */
  alone: boolean;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom(...KINDS),
  pick: fc.nat(),
  target: fc.nat(),
  actor: fc.nat({ max: 2 }),
  alone: fc.boolean(),
});

/** What one command leaves in the log: `resource_id` undefined is an import's new row (its id is read back by key). */
interface Expected {
  action: string;
  resource_type: string;
  resource_id: string;
  changes: AuditEntry['changes'];
}

/** A resource the sequence makes, by the order it is planned in; its id is known once created. */
type Handle = number;

type Actor = 'keyA' | 'keyB' | 'session' | 'console';

interface Planned {
  requestId: string;
  actor: Actor;
  /** Handles it reads or writes: commands of one group touch none in common. */
  touches: Handle[];
  /** The created resource's handle, set from the answer. */
  creates?: Handle;
  method: string;
  path: (ids: Map<Handle, string>) => string;
  body?: (ids: Map<Handle, string>) => unknown;
  /** One entry, or an import's: one per applied row, each with the POST's request id. */
  expected: (ids: Map<Handle, string>) => Expected | Expected[];
  /** An import's file: the job is waited for, and each row's new asset is read back by its key. */
  importFile?: { csv: (ids: Map<Handle, string>) => string; rows: number; creates: Array<{ handle: Handle; key: string }> };
}

interface Model {
  assets: Map<Handle, { name: string; key: string; tags: Handle[] }>;
  locations: Map<Handle, { name: string; parent: Handle | null }>;
  tags: Map<Handle, { asset: Handle }>;
  keys: Set<Handle>;
}

function nth<T>(items: Iterable<T>, pick: number): T | undefined {
  const all = [...items];
  return all.length === 0 ? undefined : all[pick % all.length];
}

/** The ops as commands valid in sequence (an op that does not apply becomes a create). */
function plan(run: number, ops: Op[]): Planned[] {
  const model: Model = { assets: new Map(), locations: new Map(), tags: new Map(), keys: new Set() };
  let handles = 0;
  const planned: Planned[] = [];
  const masterDataActor = (op: Op): Actor => (['keyA', 'keyB', 'session'] as const)[op.actor]!;
  ops.forEach((op, i) => {
    const requestId = `run${run}-cmd${i}`;
    const name = `n${run}-${i}`;
    const actor = masterDataActor(op);
    const base = { requestId, actor };
    const asset = nth(model.assets.keys(), op.pick);
    const location = nth(model.locations.keys(), op.pick);
    switch (op.kind) {
      case 'updateAsset':
        if (asset !== undefined) {
          const before = model.assets.get(asset)!.name;
          model.assets.get(asset)!.name = name;
          planned.push({
            ...base,
            touches: [asset],
            method: 'PATCH',
            path: (ids) => `/assets/${ids.get(asset)}`,
            body: () => ({ name }),
            expected: (ids) => ({ action: 'asset.updated', resource_type: 'asset', resource_id: ids.get(asset)!, changes: { name: { from: before, to: name } } }),
          });
          return;
        }
        break;
      case 'deleteAsset':
        if (asset !== undefined) {
          const { tags } = model.assets.get(asset)!;
          model.assets.delete(asset);
          for (const tag of tags) model.tags.delete(tag);
          planned.push({
            ...base,
            touches: [asset, ...tags],
            method: 'DELETE',
            path: (ids) => `/assets/${ids.get(asset)}`,
            expected: (ids) => ({ action: 'asset.deleted', resource_type: 'asset', resource_id: ids.get(asset)!, changes: null }),
          });
          return;
        }
        break;
      case 'attachTag':
        if (asset !== undefined) {
          const tag = handles++;
          model.tags.set(tag, { asset });
          model.assets.get(asset)!.tags.push(tag);
          planned.push({
            ...base,
            touches: [asset, tag],
            creates: tag,
            method: 'POST',
            path: (ids) => `/assets/${ids.get(asset)}/tags`,
            body: () => ({ tag_type: 'rfid', value: `E2${run}F${i}` }),
            expected: (ids) => ({ action: 'tag.attached', resource_type: 'tag', resource_id: ids.get(tag)!, changes: null }),
          });
          return;
        }
        break;
      case 'detachTag': {
        const tag = nth(model.tags.keys(), op.pick);
        if (tag !== undefined) {
          const owner = model.tags.get(tag)!.asset;
          model.tags.delete(tag);
          model.assets.get(owner)!.tags = model.assets.get(owner)!.tags.filter((t) => t !== tag);
          planned.push({
            ...base,
            touches: [owner, tag],
            method: 'DELETE',
            path: (ids) => `/assets/${ids.get(owner)}/tags/${ids.get(tag)}`,
            expected: (ids) => ({ action: 'tag.detached', resource_type: 'tag', resource_id: ids.get(tag)!, changes: null }),
          });
          return;
        }
        break;
      }
      case 'updateLocation':
        if (location !== undefined) {
          const before = model.locations.get(location)!.name;
          model.locations.get(location)!.name = name;
          planned.push({
            ...base,
            touches: [location],
            method: 'PATCH',
            path: (ids) => `/locations/${ids.get(location)}`,
            body: () => ({ name }),
            expected: (ids) => ({ action: 'location.updated', resource_type: 'location', resource_id: ids.get(location)!, changes: { name: { from: before, to: name } } }),
          });
          return;
        }
        break;
      case 'moveLocation': {
        // A leaf moves under another location or to the root: never a cycle.
        const leaves = [...model.locations.keys()].filter((h) => ![...model.locations.values()].some((l) => l.parent === h));
        const moved = nth(leaves, op.pick);
        if (moved !== undefined) {
          const from = model.locations.get(moved)!.parent;
          const targets = [null, ...[...model.locations.keys()].filter((h) => h !== moved)].filter((h) => h !== from);
          const to = nth(targets, op.target);
          if (to !== undefined) {
            model.locations.get(moved)!.parent = to;
            planned.push({
              ...base,
              touches: [moved, ...(from === null ? [] : [from]), ...(to === null ? [] : [to])],
              method: 'PATCH',
              path: (ids) => `/locations/${ids.get(moved)}`,
              body: (ids) => ({ parent_id: to === null ? null : Number(ids.get(to)) }),
              expected: (ids) => ({
                action: 'location.moved',
                resource_type: 'location',
                resource_id: ids.get(moved)!,
                changes: { parent_id: { from: from === null ? null : Number(ids.get(from)), to: to === null ? null : Number(ids.get(to)) } },
              }),
            });
            return;
          }
        }
        break;
      }
      case 'deleteLocation': {
        const leaves = [...model.locations.keys()].filter((h) => ![...model.locations.values()].some((l) => l.parent === h));
        const gone = nth(leaves, op.pick);
        if (gone !== undefined) {
          const parent = model.locations.get(gone)!.parent;
          model.locations.delete(gone);
          planned.push({
            ...base,
            touches: [gone, ...(parent === null ? [] : [parent])],
            method: 'DELETE',
            path: (ids) => `/locations/${ids.get(gone)}`,
            expected: (ids) => ({ action: 'location.deleted', resource_type: 'location', resource_id: ids.get(gone)!, changes: null }),
          });
          return;
        }
        break;
      }
      case 'revokeKey': {
        const key = nth(model.keys, op.pick);
        if (key !== undefined) {
          model.keys.delete(key);
          planned.push({
            requestId,
            actor: 'console',
            touches: [key],
            method: 'DELETE',
            path: (ids) => `/keys/${ids.get(key)}`,
            expected: (ids) => ({ action: 'api_key.revoked', resource_type: 'api_key', resource_id: ids.get(key)!, changes: null }),
          });
          return;
        }
        break;
      }
      case 'mintKey': {
        const key = handles++;
        model.keys.add(key);
        planned.push({
          requestId,
          actor: 'console',
          touches: [key],
          creates: key,
          method: 'POST',
          path: () => '/keys',
          body: () => ({ name: `key ${name}`, access: { assets: 'read' } }),
          expected: (ids) => ({ action: 'api_key.minted', resource_type: 'api_key', resource_id: ids.get(key)!, changes: null }),
        });
        return;
      }
      case 'importAssets': {
        // A person's or an API key's import (docs/api.md "Import"): a row that creates an asset
        // and, when there is one, a row that renames an existing asset; each row is one command.
        const created = handles++;
        const key = `I${run}-${i}`;
        const rows = [`${key},${name}`];
        const expectations: Array<(ids: Map<Handle, string>) => Expected> = [
          (ids) => ({ action: 'asset.created', resource_type: 'asset', resource_id: ids.get(created)!, changes: null }),
        ];
        const touches: Handle[] = [created];
        if (asset !== undefined) {
          const target = model.assets.get(asset)!;
          const before = target.name;
          const renamed = `${name}-i`;
          target.name = renamed;
          rows.push(`${target.key},${renamed}`);
          touches.push(asset);
          expectations.push((ids) => ({ action: 'asset.updated', resource_type: 'asset', resource_id: ids.get(asset)!, changes: { name: { from: before, to: renamed } } }));
        }
        model.assets.set(created, { name, key, tags: [] });
        planned.push({
          ...base,
          touches,
          method: 'POST',
          path: () => '/imports?resource=assets',
          expected: (ids) => expectations.map((e) => e(ids)),
          importFile: { csv: () => `external_key,name\r\n${rows.join('\r\n')}\r\n`, rows: rows.length, creates: [{ handle: created, key }] },
        });
        return;
      }
      case 'createAsset':
      case 'createLocation':
        break;
    }
    // createAsset, createLocation, and the ops that found nothing to act on: a create.
    const created = handles++;
    if (op.kind === 'createLocation' || op.kind === 'updateLocation' || op.kind === 'moveLocation' || op.kind === 'deleteLocation') {
      const parent = op.target % 2 === 0 ? null : (nth(model.locations.keys(), op.target) ?? null);
      model.locations.set(created, { name, parent });
      planned.push({
        ...base,
        touches: [created, ...(parent === null ? [] : [parent])],
        creates: created,
        method: 'POST',
        path: () => '/locations',
        body: (ids) => ({ name, ...(parent === null ? {} : { parent_id: Number(ids.get(parent)) }) }),
        expected: (ids) => ({ action: 'location.created', resource_type: 'location', resource_id: ids.get(created)!, changes: null }),
      });
    } else {
      const key = `A${run}-${i}`;
      model.assets.set(created, { name, key, tags: [] });
      planned.push({
        ...base,
        touches: [created],
        creates: created,
        method: 'POST',
        path: () => '/assets',
        body: () => ({ external_key: key, name }),
        expected: (ids) => ({ action: 'asset.created', resource_type: 'asset', resource_id: ids.get(created)!, changes: null }),
      });
    }
  });
  return planned;
}

/** Consecutive commands that touch nothing in common run together (at most 4), unless one asks to be alone. */
function groups(planned: Planned[], ops: Op[]): Planned[][] {
  const result: Planned[][] = [];
  let current: Planned[] = [];
  let touched = new Set<Handle>();
  planned.forEach((command, i) => {
    const clash = command.touches.some((h) => touched.has(h));
    if (current.length > 0 && (clash || ops[i]!.alone || current.length >= 4)) {
      result.push(current);
      current = [];
      touched = new Set();
    }
    current.push(command);
    for (const h of command.touches) touched.add(h);
  });
  if (current.length > 0) result.push(current);
  return result;
}

// ---- one run ----------------------------------------------------------------------------------

interface Actors {
  orgId: number;
  tokens: Record<'keyA' | 'keyB' | 'session', string>;
  expected: Record<Actor, AuditEntry['actor']>;
  console: AppClient;
}

async function setUp(run: number): Promise<Actors> {
  const { ctx } = svc.service;
  const orgId = (await createOrg(ctx, `audit run ${run}`)).id;
  const scopes = ['assets:read', 'assets:write', 'locations:read', 'locations:write'];
  const keyA = await mintApiKey(ctx, { orgId, name: 'key a', scopes });
  const keyB = await mintApiKey(ctx, { orgId, name: 'key b', scopes });
  // Ada, an admin of this organization too: signed in to the console, and her session token on /api/v1.
  const invitation = await inviteUser(ctx, { email: ADA, orgId, role: 'admin', by: CLI_ACTOR, publicUrl: 'http://localhost' });
  await acceptInvitation(ctx, { token: tokenOf(invitation.invite_url), password: PASSWORD });
  const console = new AppClient(svc.apiUrl);
  expect((await console.signIn(ADA, PASSWORD, orgId)).body.data.current_org.id).toBe(orgId);
  const session = (await console.request('POST', '/session-token')).body.data.token as string;
  const ada = { type: 'user', id: adaId, name: ADA };
  return {
    orgId,
    tokens: { keyA: keyA.token, keyB: keyB.token, session },
    console,
    expected: {
      keyA: { type: 'api_key', id: keyA.id, name: 'key a' },
      keyB: { type: 'api_key', id: keyB.id, name: 'key b' },
      session: { type: 'user', id: ADA, name: ADA },
      console: ada,
    },
  };
}

async function send(actors: Actors, command: Planned, ids: Map<Handle, string>): Promise<void> {
  if (command.importFile) return sendImport(actors, command, ids);
  const body = command.body?.(ids);
  const headers: Record<string, string> = { 'x-request-id': command.requestId };
  if (body !== undefined) headers['content-type'] = command.method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  let url: string;
  if (command.actor === 'console') {
    url = `${actors.console.origin}/app/api${command.path(ids)}`;
    Object.assign(headers, { origin: actors.console.origin, cookie: actors.console.cookie!, 'x-csrf-token': actors.console.csrf!, 'content-type': 'application/json' });
  } else {
    url = `${svc.apiUrl}${command.path(ids)}`;
    Object.assign(headers, bearer(actors.tokens[command.actor]));
  }
  const response = await fetch(url, { method: command.method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  expect(response.status, `${command.requestId} ${command.method} ${url}: ${text}`).toBeLessThan(300);
  if (command.creates !== undefined) ids.set(command.creates, String((JSON.parse(text) as Json).data.id));
}

/** An import: posted as CSV, its job waited for (every row applied), its new assets' ids read back by key. */
async function sendImport(actors: Actors, command: Planned, ids: Map<Handle, string>): Promise<void> {
  const file = command.importFile!;
  const token = actors.tokens[command.actor as 'keyA' | 'keyB' | 'session'];
  const headers = { ...bearer(token), 'x-request-id': command.requestId };
  const posted = await fetch(`${svc.apiUrl}${command.path(ids)}`, { method: 'POST', headers: { ...headers, 'content-type': 'text/csv' }, body: file.csv(ids) });
  const text = await posted.text();
  expect(posted.status, `${command.requestId} POST /imports: ${text}`).toBe(202);
  const id = (JSON.parse(text) as Json).data.id as number;
  let job: Json = {};
  await expect
    .poll(
      async () => {
        job = (await (await fetch(`${svc.apiUrl}/imports/${id}`, { headers: bearer(token) })).json()) as Json;
        return job.data.status;
      },
      { timeout: 30_000, interval: 50, message: `${command.requestId}: import ${id}` },
    )
    .toBe('succeeded');
  expect({ rows: job.data.rows, rejected: job.data.rejected, errors: job.data.errors }, command.requestId).toEqual({ rows: file.rows, rejected: 0, errors: [] });
  for (const { handle, key } of file.creates) {
    let found: Json[] = [];
    await expect
      .poll(
        async () => {
          found = ((await (await fetch(`${svc.apiUrl}/assets?external_key=${key}`, { headers: bearer(token) })).json()) as Json).data as Json[];
          return found.length;
        },
        { timeout: 10_000, message: key },
      )
      .toBe(1);
    ids.set(handle, String(found[0]!.id));
  }
}

/** The entries of the setup (no request: the tests' helpers call the commands directly). */
const SETUP_ACTIONS = ['api_key.minted', 'api_key.minted', 'membership.granted', 'membership.invitation_accepted', 'membership.invited', 'organization.created'];

describe('the audit log (property)', () => {
  it('lists each command once with its actor and request id, concurrent or not, and a rebuild gives the same list', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 30 }), async (ops) => {
        run++;
        const actors = await setUp(run);
        const planned = plan(run, ops);
        const ids = new Map<Handle, string>();
        for (const group of groups(planned, ops)) await Promise.all(group.map((command) => send(actors, command, ids)));

        // The console's own token reads the log as the admin she is.
        const token = actors.tokens.session;
        const log = await wholeAuditLog(svc, token);
        const commands = log.filter((e) => e.request_id !== null);
        const setup = log.filter((e) => e.request_id === null);
        expect(setup.map((e) => e.action).sort()).toEqual(SETUP_ACTIONS);
        const byRequest = new Map<string, AuditEntry[]>();
        for (const entry of commands) byRequest.set(entry.request_id!, [...(byRequest.get(entry.request_id!) ?? []), entry]);
        const wanted = planned.map((command) => [command.expected(ids)].flat());
        expect(commands).toHaveLength(wanted.flat().length);
        for (const [i, command] of planned.entries()) {
          const entries = byRequest.get(command.requestId) ?? [];
          // An import's rows, in any order (they may share an instant).
          const byText = (a: Expected, b: Expected) => JSON.stringify(a).localeCompare(JSON.stringify(b));
          const found = entries.map(({ action, resource_type, resource_id, changes }) => ({ action, resource_type, resource_id, changes })).sort(byText);
          expect(found, command.requestId).toEqual([...wanted[i]!].sort(byText));
          for (const entry of entries) {
            const actor = entry.actor;
            if (command.actor === 'session') {
              // Her user id, or her email while session tokens carry no user id.
              expect([adaId, ADA], command.requestId).toContain(actor.id);
              expect({ ...actor, id: ADA }, command.requestId).toEqual(actors.expected.session);
            } else expect(actor, command.requestId).toEqual(actors.expected[command.actor]);
          }
        }
        // Newest first.
        const times = log.map((e) => e.occurred_at);
        expect([...times].sort().reverse()).toEqual(times);

        const { ctx } = svc.service;
        await rebuildProjections({ store: ctx.store, pool: ctx.pool, log: ctx.log, projections: selectProjections(allProjections(), ['audit']), batchSize: 50 });
        expect(await wholeAuditLog(svc, token)).toEqual(log);
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  }, 600_000);
});
