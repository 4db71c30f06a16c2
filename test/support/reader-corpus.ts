import { assignScanPoint, registerReader } from '../../shared/domain/readers/commands.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger, type Logger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from './service.js';
import { client } from '../master-data/http.js';
import { createOrg, mintApiKey } from './auth.js';

/**
 * What the fixed-reader tests share, whatever carries the messages (Kafka, MQTT): unique names,
 * an org with a registered reader and two assigned scan points, tagged assets, and messages of
 * both shapes (docs/scan-ingestion.md "Message formats").
 */

let n = 0;
export const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++n}`;
export const hex = () => `E280${Math.random().toString(16).slice(2, 14).padEnd(12, '0')}${(++n).toString(16).padStart(8, '0')}`.toUpperCase();

/** An org (named after `label`) with a reader, two scan points (DOOR-A, DOOR-B) and assets with RFID tags. */
export async function readerWorld(service: RunningService, label: string, assets = 2) {
  const ctx = service.ctx;
  const orgId = (await createOrg(ctx, unique(label))).id;
  const api = client(service.urls.api!, (await mintApiKey(ctx, { orgId, scopes: ['assets:read', 'assets:write', 'locations:write', 'tracking:read'] })).token);
  const locations = [];
  for (const door of ['A', 'B']) {
    const key = unique(`DOOR-${door}`);
    locations.push((await api<{ data: { id: number; external_key: string } }>('POST', '/locations', { body: { name: door, external_key: key } })).body.data);
  }
  const reader = unique('dock-door');
  await registerReader(ctx, orgId, reader);
  await assignScanPoint(ctx, { orgId, readerId: reader, capturePoint: `${reader}-1`, locationExternalKey: locations[0]!.external_key });
  await assignScanPoint(ctx, { orgId, readerId: reader, capturePoint: `${reader}-2`, locationExternalKey: locations[1]!.external_key });
  const tagged = [];
  for (let i = 0; i < assets; i++) {
    const epc = hex();
    tagged.push({ ...(await api<{ data: { id: number } }>('POST', '/assets', { body: { name: `A${i}`, tags: [{ tag_type: 'rfid', value: epc }] } })).body.data, epc });
  }
  return { orgId, api, reader, locations, assets: tagged };
}

/** An observed time `s` seconds after the corpus's origin, as RFC 3339 and as microseconds. */
export const at = (s: number) => new Date(Date.UTC(2026, 4, 25, 14, 0, 0) + s * 1000).toISOString();
export const us = (s: number) => (Date.UTC(2026, 4, 25, 14, 0, 0) + s * 1000) * 1000;

export function canonical(reader: string, reads: Array<{ point: string; epc: string; s: number }>) {
  return { reader_id: reader, reads: reads.map((r) => ({ capture_point: r.point, tag_type: 'rfid', value: r.epc, observed_at: at(r.s), rssi: -60 })) };
}

export function cs463(reader: string, reads: Array<{ point: string; epc: string; s: number }>, sequenceNumber = 0) {
  return {
    sequenceNumber,
    rfidReaderName: reader,
    numberOfTags: reads.length,
    tags: reads.map((r) => ({ epc: r.epc.toLowerCase(), timeStampOfRead: us(r.s), antennaPort: 2, capturePointName: r.point, rssi: '-67', extra: 'ignored' })),
  };
}

/**
 * Services of a reader test, started in this process on ephemeral ports against the file's
 * database (`databaseUrl` is read at each start), stopped one by one or all at the end.
 */
export function readerServices(databaseUrl: () => string) {
  const running: RunningService[] = [];
  return {
    async start(env: Record<string, string>, roles = 'api,ingest,projector', log?: Logger): Promise<RunningService> {
      const config = loadConfig({
        PORT: '0',
        OPS_PORT: '0',
        INGEST_PORT: '0',
        LOG_LEVEL: process.env.TEST_LOG ? 'warn' : 'silent',
        ROLES: roles,
        SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY,
        ...env,
      });
      const service = await startService(config, databaseUrl(), log ?? createLogger(config.LOG_LEVEL));
      running.push(service);
      return service;
    },
    async stop(service: RunningService): Promise<void> {
      running.splice(running.indexOf(service), 1);
      await service.stop();
    },
    async stopAll(): Promise<void> {
      for (const service of running.splice(0)) await service.stop().catch(() => undefined);
    },
  };
}
