import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { hex, unique } from '../support/reader-corpus.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';
import { AppClient, type Json } from '../people/app-client.js';
import { locationScansStream } from '../../shared/domain/scans/events.js';
import { signedInUser } from './sse-client.js';

/**
 * Scanning in the console over real HTTP (docs/web-app.md, "Scanning in the console"): an
 * operator's submission through the app with the ingest endpoint's rules (placed, unknown, a
 * repeat that changes nothing, parallel repeats counted once, another body refused, a location
 * by its tag), what each read placed, the person named in the events' metadata; a viewer refused.
 */

const SLOW = 120_000;
let svc: TestService;
let orgId: number;
let operator: AppClient & { email: string };
let viewer: AppClient;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  svc = await startTestService('console_scans');
  orgId = (await createOrg(svc.service.ctx, 'Acme')).id;
  operator = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'operator');
  viewer = await signedInUser(svc.service.ctx, svc.apiUrl, orgId, 'viewer');
  const key = await mintApiKey(svc.service.ctx, { orgId, name: 'checker', scopes: ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'] });
  api = client(svc.apiUrl, key.token);
}, SLOW);

afterAll(async () => {
  await svc?.stop();
});

async function world() {
  const shelfTag = hex();
  const shelf = (await api<Json>('POST', '/locations', { body: { name: 'Shelf', external_key: unique('SHELF'), tags: [{ tag_type: 'rfid', value: shelfTag }] } })).body.data;
  const epc = hex();
  const drill = (await api<Json>('POST', '/assets', { body: { name: 'Drill <b>', external_key: unique('DRILL'), tags: [{ tag_type: 'rfid', value: epc }] } })).body.data;
  expect(shelf.id).toBeGreaterThan(0);
  expect(drill.id).toBeGreaterThan(0);
  return { shelf, shelfTag, drill, epc };
}

describe('POST /app/api/scans', () => {
  it(
    'places reads as the ingest endpoint does, says what each placed, names the person in the metadata; the same submission_id again changes nothing',
    async () => {
      const { shelf, drill, epc } = await world();
      const stranger = hex();
      const body = {
        submission_id: unique('sub'),
        device_id: 'console',
        location: { id: shelf.id },
        reads: [
          { tag_type: 'rfid', value: epc },
          { tag_type: 'rfid', value: stranger },
        ],
      };
      const first = await operator.request('POST', '/scans', body);
      expect(first.status).toBe(202);
      expect(first.body.data).toEqual({
        accepted: 1,
        unknown: 1,
        duplicate: false,
        reads: [
          { tag_type: 'rfid', value: epc, asset: { id: drill.id, external_key: drill.external_key, name: 'Drill <b>' }, cause: null },
          { tag_type: 'rfid', value: stranger, asset: null, cause: 'unknown_tag' },
        ],
      });
      // Placed: the report (it waits for the projection, as every command does) shows the drill on the shelf.
      expect((await api<Json>('GET', `/assets/${drill.id}`)).body.data.location_id).toBe(shelf.id);

      const again = await operator.request('POST', '/scans', body);
      expect(again.status).toBe(202);
      expect(again.body.data).toEqual({ ...first.body.data, duplicate: true });
      const events = await svc.service.ctx.store.readStream(locationScansStream(orgId, shelf.id));
      expect(events.map((e) => e.type)).toEqual(['ScansRecorded']);
      // Who scanned: the person, as every command of theirs records it.
      expect(events[0]!.metadata).toMatchObject({ actor: { type: 'user', name: operator.email } });
      expect(typeof (events[0]!.metadata as Json).request_id).toBe('string');
      const history = (await api<Json>('GET', `/assets/${drill.id}/history`)).body;
      expect(history.total_count).toBe(1);

      // The same id with another body: the ingest endpoint's 409.
      const other = await operator.request('POST', '/scans', { ...body, reads: [{ tag_type: 'rfid', value: epc }] });
      expect(other.status).toBe(409);
      expect(other.body.error.detail).toBe('submission_id was already used with a different body');
    },
    SLOW,
  );

  it(
    'the same submission sent ten times at once is recorded once; a location by its shelf tag; a location that is none is the field error',
    async () => {
      const { shelf, shelfTag, drill, epc } = await world();
      const body = { submission_id: unique('race'), device_id: 'console', location: { tag: { tag_type: 'rfid', value: shelfTag } }, reads: [{ tag_type: 'rfid', value: epc }] };
      const answers = await Promise.all(Array.from({ length: 10 }, () => operator.request('POST', '/scans', body)));
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(202));
      expect(answers.filter((a) => a.body.data.duplicate === false)).toHaveLength(1);
      for (const answer of answers) expect(answer.body.data.reads).toEqual([{ tag_type: 'rfid', value: epc, asset: { id: drill.id, external_key: drill.external_key, name: 'Drill <b>' }, cause: null }]);
      expect((await svc.service.ctx.store.readStream(locationScansStream(orgId, shelf.id))).map((e) => e.type)).toEqual(['ScansRecorded']);
      expect((await api<Json>('GET', `/assets/${drill.id}/history`)).body.total_count).toBe(1);

      const nowhere = await operator.request('POST', '/scans', { ...body, submission_id: unique('none'), location: { external_key: 'NO-SUCH-SHELF' } });
      expect(nowhere.status).toBe(400);
      expect(nowhere.body.error.fields).toEqual([expect.objectContaining({ field: 'location.external_key', code: 'fk_not_found' })]);
    },
    SLOW,
  );

  it('a viewer gets the app\'s 403; without the CSRF token, 403; signed out, 401', async () => {
    const { shelf, epc } = await world();
    const body = { submission_id: unique('viewer'), device_id: 'console', location: { id: shelf.id }, reads: [{ tag_type: 'rfid', value: epc }] };
    const refused = await viewer.request('POST', '/scans', body);
    expect(refused.status).toBe(403);
    expect(refused.body.error.detail).toBe('Your role (viewer) does not allow this');
    expect((await operator.request('POST', '/scans', body, { csrf: null })).status).toBe(403);
    expect((await new AppClient(svc.apiUrl).request('POST', '/scans', body)).status).toBe(401);
    expect(await svc.service.ctx.store.readStream(locationScansStream(orgId, shelf.id))).toEqual([]);
  });
});
