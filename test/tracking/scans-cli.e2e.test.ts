import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { handheld } from '../support/scans.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/** `scans unknown --org <id> [--json]` (docs/cli.md "scans unknown"), run as a child process against a running service. */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService('scans_cli');
});
afterAll(async () => {
  await svc?.stop();
});

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(TSX, ['services/cli/main.ts', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: svc.db.url, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1' }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe('scans unknown', () => {
  it('lists the reads that placed nothing by cause, largest count first, counting a repeated submission once', { timeout: 120_000 }, async () => {
    const ctx = svc.service.ctx;
    const orgId = (await createOrg(ctx, 'unknown-reads')).id;
    const api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId, scopes: ['assets:write', 'locations:write'] })).token);
    const submit = handheld(svc, (await mintApiKey(ctx, { orgId, scopes: ['scans:write'] })).token);
    const shelf = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'S', tags: [{ tag_type: 'barcode', value: 'SHELF-9' }] } })).body.data;
    const held = (await api<{ data: { id: number } }>('POST', '/assets', { body: { name: 'A', tags: [{ tag_type: 'rfid', value: 'E2800000000000000000AAAA' }] } })).body.data;
    expect((await api('DELETE', `/assets/${held.id}`)).status).toBe(204);
    const repeated = {
      submission_id: randomUUID(),
      device_id: 'h',
      location: { id: shelf.id },
      reads: [
        { tag_type: 'rfid', value: 'e2800000000000000000bbbb', observed_at: '2026-05-25T10:00:00.000Z' },
        { tag_type: 'rfid', value: 'E2800000000000000000BBBB', observed_at: '2026-05-25T10:05:00.000Z' },
        { tag_type: 'rfid', value: 'E2800000000000000000BBBB', observed_at: '2026-05-25T10:02:00.000Z' },
        { tag_type: 'rfid', value: 'E2800000000000000000AAAA', observed_at: '2026-05-25T10:01:00.000Z' },
        { tag_type: 'barcode', value: 'SHELF-9', observed_at: '2026-05-25T10:01:00.000Z' },
      ],
    };
    expect((await submit(repeated)).body.data).toEqual({ accepted: 0, unknown: 5, duplicate: false });
    expect((await submit(repeated)).body.data!.duplicate).toBe(true);
    const run = await cli('scans', 'unknown', '--org', String(orgId), '--json');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual([
      { cause: 'unknown_tag', reader_id: null, capture_point: null, tag_type: 'rfid', value: 'E2800000000000000000BBBB', count: 3, first_seen: '2026-05-25T10:00:00.000Z', last_seen: '2026-05-25T10:05:00.000Z' },
      { cause: 'location_tag', reader_id: null, capture_point: null, tag_type: 'barcode', value: 'SHELF-9', count: 1, first_seen: '2026-05-25T10:01:00.000Z', last_seen: '2026-05-25T10:01:00.000Z' },
      { cause: 'retired_tag', reader_id: null, capture_point: null, tag_type: 'rfid', value: 'E2800000000000000000AAAA', count: 1, first_seen: '2026-05-25T10:01:00.000Z', last_seen: '2026-05-25T10:01:00.000Z' },
    ]);
    const table = await cli('scans', 'unknown', '--org', String(orgId));
    expect(table.stdout.split('\n')[0]).toMatch(/^cause\s+reader_id\s+capture_point\s+tag_type\s+value\s+count\s+first_seen\s+last_seen$/);
    const missing = await cli('scans', 'unknown', '--org', '2147483647', '--json');
    expect(missing.code).toBe(2);
    expect(missing.stdout).toBe('');
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    // The metrics count reads by outcome.
    const metrics = await (await fetch(`${svc.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/tracking_ingest_reads_total\{path="handheld",outcome="unknown_tag"\} \d+/);
  });
});
