import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg, mintApiKey } from '../support/auth.js';
import { startTestService, type TestService } from '../support/service.js';
import { client } from '../master-data/http.js';

/** `readers` and `scan-points` commands (docs/cli.md "readers and scan-points"), run as child processes against a running service. */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService('readers_cli');
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

async function json(...args: string[]): Promise<unknown> {
  const run = await cli(...args, '--json');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout);
}

/** One line on stderr, nothing on stdout, a non-zero exit. */
async function refused(...args: string[]): Promise<string> {
  const run = await cli(...args, '--json');
  expect(run.code).not.toBe(0);
  expect(run.stdout).toBe('');
  const lines = run.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

describe('readers and scan points CLI', () => {
  it('register, assign, move, list, unassign; a reader belongs to one org; a deleted location unassigns its points', { timeout: 180_000 }, async () => {
    const ctx = svc.service.ctx;
    const org = (await createOrg(ctx, 'readers')).id;
    const other = (await createOrg(ctx, 'readers-other')).id;
    const api = client(svc.apiUrl, (await mintApiKey(ctx, { orgId: org, scopes: ['locations:write'] })).token);
    const dock = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Dock', external_key: 'CLI-DOCK' } })).body.data;
    const yard = (await api<{ data: { id: number } }>('POST', '/locations', { body: { name: 'Yard', external_key: 'CLI-YARD' } })).body.data;

    expect(await json('readers', 'register', '--org', String(org), '--reader', 'dock-door-3')).toEqual({ reader_id: 'dock-door-3', org_id: org });
    // Again for the same org: the same answer; for another org: refused.
    expect(await json('readers', 'register', '--org', String(org), '--reader', 'dock-door-3')).toEqual({ reader_id: 'dock-door-3', org_id: org });
    expect(await refused('readers', 'register', '--org', String(other), '--reader', 'dock-door-3')).toContain(`already registered to organization ${org}`);
    const readers = (await json('readers', 'list', '--org', String(org))) as Array<Record<string, unknown>>;
    expect(readers).toEqual([{ reader_id: 'dock-door-3', org_id: org, registered_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/) }]);
    expect(await json('readers', 'list', '--org', String(other))).toEqual([]);

    const assign = (point: string, location: string) => json('scan-points', 'assign', '--org', String(org), '--reader', 'dock-door-3', '--capture-point', point, '--location', location);
    expect(await assign('dock-door-3-1', 'CLI-DOCK')).toEqual({ reader_id: 'dock-door-3', capture_point: 'dock-door-3-1', location_id: dock.id, location_external_key: 'CLI-DOCK' });
    expect(await assign('dock-door-3-2', 'CLI-DOCK')).toMatchObject({ location_id: dock.id });
    // Re-assigning moves the point.
    expect(await assign('dock-door-3-2', 'CLI-YARD')).toEqual({ reader_id: 'dock-door-3', capture_point: 'dock-door-3-2', location_id: yard.id, location_external_key: 'CLI-YARD' });
    expect(await json('scan-points', 'list', '--org', String(org), '--reader', 'dock-door-3')).toEqual([
      { reader_id: 'dock-door-3', capture_point: 'dock-door-3-1', location_id: dock.id, location_external_key: 'CLI-DOCK' },
      { reader_id: 'dock-door-3', capture_point: 'dock-door-3-2', location_id: yard.id, location_external_key: 'CLI-YARD' },
    ]);
    expect(await refused('scan-points', 'assign', '--org', String(org), '--reader', 'dock-door-3', '--capture-point', 'x', '--location', 'NOWHERE')).toContain('NOWHERE');
    expect(await refused('scan-points', 'assign', '--org', String(other), '--reader', 'dock-door-3', '--capture-point', 'x', '--location', 'CLI-DOCK')).toContain('not registered');

    expect(await json('scan-points', 'unassign', '--org', String(org), '--reader', 'dock-door-3', '--capture-point', 'dock-door-3-1')).toEqual({ reader_id: 'dock-door-3', capture_point: 'dock-door-3-1' });
    expect(await refused('scan-points', 'unassign', '--org', String(org), '--reader', 'dock-door-3', '--capture-point', 'dock-door-3-1')).toContain('not assigned');
    // A location's soft delete leaves its points unassigned.
    expect((await api('DELETE', `/locations/${yard.id}`)).status).toBe(204);
    expect(await json('scan-points', 'list', '--org', String(org))).toEqual([]);
    const table = await cli('scan-points', 'list', '--org', String(org));
    expect(table.code).toBe(0);
    expect(table.stdout.trim()).toBe('(none)');
  });
});
