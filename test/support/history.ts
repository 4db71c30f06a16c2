import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { assignScanPoint, registerReader, unassignScanPoint } from '../../shared/domain/readers/commands.js';
import { revokeApiKey } from '../../shared/domain/orgs-and-keys/commands.js';
import { acceptInvitation, changeMemberRole, createUser, inviteUser } from '../../shared/domain/people/commands.js';
import { keepReaderDeadLetters } from '../../shared/domain/scans/commands.js';
import { client } from '../master-data/http.js';
import { createOrg, mintApiKey } from './auth.js';
import { eventually, gateway } from './kafka.js';
import { handheld } from './scans.js';
import type { TestService } from './service.js';

/**
 * A history with every kind of event, written the way clients write it: organizations and keys
 * (one revoked), a location tree with updates, renames, a re-parent and deletes, assets with tags
 * attached, detached and retired with a deleted asset, renames and patches, readers and scan
 * points assigned, moved and unassigned, and scans through the handheld endpoint (moves, a tag
 * parked in place, late reads that split and join visits, unknown tags, a location's own tag, a
 * read at a deleted location) and, when the service consumes Kafka, through fixed readers in both
 * payload shapes (an unregistered reader and an unassigned capture point included).
 *
 * Returns the organization, a key with every public scope, and the GET paths whose answers show
 * all of it.
 */
export interface History {
  orgId: number;
  token: string;
  paths: string[];
  /** Of `paths`, those of deleted assets and locations: 404. */
  gone: string[];
}

const SCOPES = ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read'];

export async function seedHistory(svc: TestService, label: string): Promise<History> {
  const ctx = svc.service.ctx;
  const run = `${label}-${randomUUID().slice(0, 6)}`;
  const org = await createOrg(ctx, `History ${run}`);
  const orgId = org.id;
  const token = (await mintApiKey(ctx, { orgId, scopes: SCOPES })).token;
  const revoked = await mintApiKey(ctx, { orgId, scopes: ['assets:read'] });
  await revokeApiKey(ctx, revoked.id);
  // People: a user made by the CLI, an accepted invitation, a changed role (every table of the people projection).
  const admin = await createUser(ctx, { email: `admin-${run}@example.com`, orgId, role: 'admin', by: { kind: 'cli' }, publicUrl: svc.apiUrl });
  const invitation = await inviteUser(ctx, { email: `member-${run}@example.com`, orgId, role: 'operator', by: { kind: 'cli' }, publicUrl: svc.apiUrl });
  const member = await acceptInvitation(ctx, { token: invitation.invite_url.split('#token=')[1]!, password: 'a long enough password' });
  await changeMemberRole(ctx, { userId: member.user_id, orgId, role: 'admin', by: { kind: 'user', user_id: admin.id, email: admin.email } });
  const api = client(svc.apiUrl, token);
  const submit = handheld(svc, (await mintApiKey(ctx, { orgId, scopes: ['scans:write'] })).token);

  const ok = async <T>(method: string, path: string, body?: unknown, status = method === 'POST' && !path.includes('/rename') ? 201 : 200): Promise<T> => {
    const reply = await api<{ data: T }>(method, path, body === undefined ? {} : { body });
    expect(reply.status, `${method} ${path}: ${reply.text}`).toBe(status);
    return reply.body.data;
  };
  type Loc = { id: number; external_key: string };
  const location = (body: Record<string, unknown>) => ok<Loc>('POST', '/locations', { name: body.external_key, ...body });

  // The tree: a site, two buildings, rooms, shelves; one shelf carries a label tag.
  const site = await location({ external_key: 'SITE', description: 'main site' });
  const north = await location({ external_key: 'NORTH', parent_id: site.id });
  const south = await location({ external_key: 'SOUTH', parent_id: site.id });
  const rooms = [await location({ external_key: 'N-101', parent_id: north.id }), await location({ external_key: 'N-102', parent_id: north.id }), await location({ external_key: 'S-201', parent_id: south.id })];
  const shelves: Loc[] = [];
  for (const room of rooms) {
    for (const n of [1, 2]) shelves.push(await location({ external_key: `${room.external_key}-SH${n}`, parent_id: room.id, tags: n === 1 ? [{ tag_type: 'barcode', value: `LBL-${room.external_key}` }] : [] }));
  }
  const windowed = await location({ external_key: 'POPUP', parent_id: site.id, valid_from: '2020-01-01T00:00:00Z', valid_to: '2999-01-01T00:00:00Z', is_active: false });
  await ok('PATCH', `/locations/${rooms[1]!.id}`, { description: 'second room', name: 'Room 102' });
  await ok('POST', `/locations/${rooms[2]!.id}/rename`, { external_key: 'S-201-RENAMED' });
  // Re-parent a room (with its shelves) under the other building.
  await ok('PATCH', `/locations/${rooms[2]!.id}`, { parent_id: north.id });
  const doomed = await location({ external_key: 'DOOMED', parent_id: south.id });
  const doomedLeaf = await location({ external_key: 'DOOMED-LEAF', parent_id: site.id });
  await ok('DELETE', `/locations/${doomedLeaf.id}`, undefined, 204);

  // Assets with tags.
  type Asset = { id: number; external_key: string };
  const assets: Array<Asset & { epc: string }> = [];
  for (let i = 0; i < 6; i++) {
    const epc = `E2801160600002084D9F${String(1000 + i)}`;
    const created = await ok<Asset>('POST', '/assets', {
      name: `Asset ${i}`,
      ...(i % 3 === 0 ? {} : { external_key: `AST-${i}` }),
      description: i % 2 ? `described ${i}` : null,
      metadata: { serial: i, tags: ['x', i] },
      tags: [{ tag_type: 'rfid', value: epc }, ...(i % 2 ? [{ tag_type: 'barcode', value: `SN-${i}` }] : [])],
      ...(i === 5 ? { valid_from: '2020-01-01T00:00:00.123Z' } : {}),
    });
    assets.push({ ...created, epc });
  }
  await ok('PATCH', `/assets/${assets[0]!.id}`, { name: 'Asset zero', metadata: { serial: 0, patched: true } });
  await ok('POST', `/assets/${assets[1]!.id}/rename`, { external_key: 'AST-1-RENAMED' });
  const extra = await ok<{ id: number }>('POST', `/assets/${assets[2]!.id}/tags`, { tag_type: 'ble', value: 'BLE-2' });
  await ok('DELETE', `/assets/${assets[2]!.id}/tags/${extra.id}`, undefined, 204);
  await ok('POST', `/locations/${shelves[3]!.id}/tags`, { tag_type: 'rfid', value: 'E2801160600002084D9FAAAA' });

  // Handheld scans over three days: moves, a parked tag, late reads, unknown and location tags.
  const day = (d: number, h: number, m = 0, s = 0, ms = 0) => new Date(Date.UTC(2026, 4, 20 + d, h, m, s, ms)).toISOString();
  let handheldReads = 0;
  const scan = async (loc: Loc | { external_key: string }, reads: Array<{ tag_type?: string; value: string; observed_at?: string; rssi?: number }>) => {
    const body = { submission_id: randomUUID(), device_id: `handheld-${run}`, location: 'id' in loc ? { id: loc.id } : loc, reads: reads.map((r) => ({ tag_type: 'rfid', ...r })) };
    const reply = await submit(body);
    expect(reply.status, JSON.stringify(reply.body)).toBe(202);
    handheldReads += reads.length;
    return body;
  };
  for (const [i, asset] of assets.entries()) {
    await scan(shelves[i % shelves.length]!, [{ value: asset.epc, observed_at: day(0, 9, i), rssi: -50 - i }]);
    await scan(shelves[(i + 1) % shelves.length]!, [{ value: asset.epc.toLowerCase(), observed_at: day(1, 10, i, 30, 123) }]);
  }
  // Parked: one tag read again and again on the same shelf.
  await scan(shelves[0]!, Array.from({ length: 20 }, (_, k) => ({ value: assets[0]!.epc, observed_at: day(2, 8, k, 15) })));
  // Late reads: one inside an earlier visit (splits it), one between two visits at the same place (joins them).
  await scan(shelves[4]!, [{ value: assets[0]!.epc, observed_at: day(0, 12) }]);
  await scan(shelves[1]!, [{ value: assets[1]!.epc, observed_at: day(0, 20) }]);
  // Unknown tags, a barcode, the shelf label by tag, a location's own tag read as an asset.
  await scan({ external_key: 'N-101-SH1' }, [{ value: 'E2801160600002084D9FFFFF', observed_at: day(1, 11) }, { tag_type: 'barcode', value: 'SN-1', observed_at: day(1, 11, 1) }]);
  const byLabel = { submission_id: randomUUID(), device_id: `handheld-${run}`, location: { tag: { tag_type: 'barcode', value: 'LBL-N-102' } }, reads: [{ tag_type: 'barcode', value: 'SN-3', observed_at: day(1, 12) }, { tag_type: 'rfid', value: 'E2801160600002084D9FAAAA', observed_at: day(1, 12) }] };
  expect((await submit(byLabel)).status).toBe(202);
  handheldReads += byLabel.reads.length;
  // The same submission again: recorded once.
  expect((await submit(byLabel)).body.data?.duplicate).toBe(true);
  // An asset scanned, then deleted (its tag retires); a read of the retired tag.
  await scan(doomed, [{ value: assets[4]!.epc, observed_at: day(2, 9) }]);
  await scan(shelves[2]!, [{ value: assets[4]!.epc, observed_at: day(2, 10) }]);
  await ok('DELETE', `/assets/${assets[4]!.id}`, undefined, 204);
  await scan(shelves[2]!, [{ value: assets[4]!.epc, observed_at: day(2, 11) }]);
  // A location scanned at, then deleted (closes its scans stream).
  await ok('DELETE', `/locations/${doomed.id}`, undefined, 204);

  // Fixed readers: registered, points assigned, one moved, one unassigned.
  const readerId = `dock-${run}`;
  await registerReader(ctx, orgId, readerId);
  await assignScanPoint(ctx, { orgId, readerId, capturePoint: `${readerId}-1`, locationExternalKey: 'N-101-SH2' });
  await assignScanPoint(ctx, { orgId, readerId, capturePoint: `${readerId}-2`, locationExternalKey: 'S-201-SH1' });
  await assignScanPoint(ctx, { orgId, readerId, capturePoint: `${readerId}-2`, locationExternalKey: 'N-102-SH1' });
  await assignScanPoint(ctx, { orgId, readerId, capturePoint: `${readerId}-3`, locationExternalKey: 'N-102-SH2' });
  await unassignScanPoint(ctx, { orgId, readerId, capturePoint: `${readerId}-3` });
  // Reader messages an MQTT subscriber could not read, kept as dead letters: one naming this
  // org's reader, one not JSON at all.
  await keepReaderDeadLetters(ctx, [
    { topic: `scans/fixed/${readerId}`, payload: Buffer.from(JSON.stringify({ reader_id: readerId, reads: [] })), reason: 'canonical shape: reads: too small', receivedAt: new Date(day(2, 12)) },
    { topic: 'scans/fixed/unknown', payload: Buffer.from('not json'), reason: 'not valid JSON', receivedAt: new Date(day(2, 12, 0, 1)) },
  ]);

  if (ctx.config.KAFKA_BROKERS) {
    const topic = ctx.config.KAFKA_SCAN_TOPIC;
    const first = {
      reader_id: readerId,
      reads: [
        { capture_point: `${readerId}-1`, tag_type: 'rfid', value: assets[3]!.epc, observed_at: day(2, 13), rssi: -61 },
        { capture_point: `${readerId}-1`, tag_type: 'rfid', value: assets[3]!.epc, observed_at: day(2, 13, 0, 5) },
        { capture_point: `${readerId}-3`, tag_type: 'rfid', value: assets[3]!.epc, observed_at: day(2, 13, 1) },
      ],
    };
    const gw = await gateway();
    try {
      await gw.publish(topic, readerId, first);
      const us = (iso: string) => Date.parse(iso) * 1000 + 7;
      await gw.publish(topic, readerId, {
        sequenceNumber: 0,
        rfidReaderName: readerId,
        numberOfTags: 2,
        tags: [
          { epc: assets[5]!.epc.toLowerCase(), timeStampOfRead: us(day(2, 14)), antennaPort: 2, capturePointName: `${readerId}-2`, rssi: '-67' },
          { epc: assets[0]!.epc, timeStampOfRead: us(day(1, 23)), antennaPort: 1, capturePointName: `${readerId}-1`, rssi: '-70' },
        ],
      });
      await gw.publish(topic, `ghost-${run}`, { reader_id: `ghost-${run}`, reads: [{ capture_point: 'x', tag_type: 'rfid', value: assets[3]!.epc, observed_at: day(2, 15) }] });
    } finally {
      await gw.close();
    }
    // Every Kafka read is in: five in the org (one at an unassigned point), the ghost reader's under org 0.
    const kafkaReads = async (expected: { org: number; ghost: number; stray: number }) =>
      eventually(async () => {
        const { rows } = await ctx.pool.query<{ org: number; ghost: number; stray: number }>(
          `SELECT ((SELECT coalesce(sum(reads), 0) FROM scan_read_chunks WHERE org_id = $1) + (SELECT coalesce(sum(count), 0) FROM unknown_reads WHERE org_id = $1))::int AS org,
                  (SELECT count(*) FROM unknown_reads WHERE org_id = 0 AND reader_id = $2)::int AS ghost,
                  (SELECT coalesce(sum(count), 0) FROM unknown_reads WHERE org_id = $1 AND value = $3)::int AS stray`,
          [orgId, `ghost-${run}`, stray.toUpperCase()],
        );
        expect(rows[0]).toEqual(expected);
      });
    // Reads delivered more than once, further on in the log (a gateway republishing, Kafka
    // redelivering): recorded once, as they were first resolved. A stray tag read twice while no
    // one holds it, then attached to an asset, then its read delivered a third time: it stays one
    // unknown read. The same partition's last message shows that every earlier one is in.
    const stray = 'E2801160600002084D9F5555';
    const strayReport = { reader_id: readerId, reads: [{ capture_point: `${readerId}-1`, tag_type: 'rfid', value: stray, observed_at: day(2, 16) }] };
    const republisher = await gateway();
    try {
      await republisher.publish(topic, readerId, strayReport);
      await republisher.publish(topic, readerId, strayReport);
      await kafkaReads({ org: handheldReads + 6, ghost: 1, stray: 1 });
      await ok('POST', `/assets/${assets[3]!.id}/tags`, { tag_type: 'rfid', value: stray });
      await republisher.publish(topic, readerId, strayReport);
      await republisher.publish(topic, readerId, first);
      await republisher.publish(topic, readerId, { reader_id: readerId, reads: [{ capture_point: `${readerId}-1`, tag_type: 'rfid', value: assets[3]!.epc, observed_at: day(2, 17) }] });
    } finally {
      await republisher.close();
    }
    await kafkaReads({ org: handheldReads + 7, ghost: 1, stray: 1 });
  }

  const ids = { assets: assets.filter((a) => a !== assets[4]).map((a) => a.id), locations: [site, north, south, ...rooms, ...shelves, windowed].map((l) => l.id) };
  const gone = [`/assets/${assets[4]!.id}`, `/assets/${assets[4]!.id}/history`, `/locations/${doomed.id}`, `/locations/${doomed.id}/children`, `/locations/${doomedLeaf.id}/tags`];
  const paths = [
    '/orgs/me',
    '/assets',
    '/assets?limit=3&offset=2&sort=-name',
    '/assets?include_deleted=true&sort=external_key',
    '/assets?q=asset',
    `/assets?location_id=${shelves[0]!.id}`,
    '/locations',
    '/locations?include_deleted=true&sort=-updated_at',
    `/locations?parent_id=${north.id}`,
    '/reports/asset-locations',
    '/reports/asset-locations?include_deleted=true&sort=asset_external_key',
    `/reports/asset-locations?location_id=${shelves[0]!.id}`,
    ...ids.assets.flatMap((id) => [`/assets/${id}`, `/assets/${id}/tags`, `/assets/${id}/history`, `/assets/${id}/history?sort=event_observed_at`]),
    ...ids.locations.flatMap((id) => [`/locations/${id}`, `/locations/${id}/tags`, `/locations/${id}/ancestors`, `/locations/${id}/children`, `/locations/${id}/descendants`]),
  ];
  return { orgId, token, paths: [...paths, ...gone], gone };
}

/**
 * The exact text of every answer (status and body), path by path; only an error's request_id (a
 * new one per request) is blanked out.
 */
export async function snapshot(apiUrl: string, token: string, paths: readonly string[]): Promise<Record<string, string>> {
  const answers: Record<string, string> = {};
  for (const path of paths) {
    const response = await fetch(apiUrl + path, { headers: { authorization: `Bearer ${token}` } });
    const text = await response.text();
    answers[path] = `${response.status} ${response.status >= 400 ? text.replace(/"request_id":"[0-9A-Z]+"/, '"request_id":"-"') : text}`;
  }
  return answers;
}

/** Every path answers 200, except those of deleted resources: 404. */
export function expectAnswered(answers: Record<string, string>, history: History): void {
  expect(Object.entries(answers).filter(([path, answer]) => !answer.startsWith(history.gone.includes(path) ? '404 ' : '200 '))).toEqual([]);
}
