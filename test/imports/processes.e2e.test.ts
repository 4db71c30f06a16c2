import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { assetStream } from '../../shared/domain/assets/events.js';
import { createOrg, mintApiKey } from '../support/auth.js';
import { processWorld } from '../support/processes.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY } from '../support/service.js';
import { importClient, type ImportBody } from './support.js';

/**
 * Imports across processes (docs/api.md, "Import"): the service as child processes on one
 * Postgres, killed with SIGKILL in the middle of an import and started again (the job resumes and
 * every row is applied once: each asset's stream holds exactly what one apply appends), and the
 * CLI's `import` as a script runs it.
 */

const SLOW = 300_000;
const ROOT = path.resolve(import.meta.dirname, '../..');

const world = processWorld('imports_processes', SLOW);

describe('kill -9 in the middle of an import', () => {
  it('after a restart the import finishes, and every row is applied once', async () => {
    const first = await world.processes.start('api,projector');
    const org = await createOrg(world.ctx, 'Kill org');
    const { token } = await mintApiKey(world.ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
    const rows = 1500;
    const stamp = Date.now().toString(36);
    const keys = Array.from({ length: rows }, (_, i) => `K9-${stamp}-${i}`);
    // A tag on each: one apply appends AssetCreated and TagAttached to the asset's stream.
    const file = `external_key,name,tags\n${keys.map((k, i) => `${k},Asset ${i},barcode:${k}`).join('\n')}\n`;

    const imports = importClient(first.urls.api!, token);
    const posted = await imports.post('?resource=assets', file);
    expect(posted.status).toBe(202);
    const id = posted.body.data!.id;
    let seen: ImportBody;
    for (;;) {
      seen = await imports.get(id);
      if (seen.created > 100) break;
      expect(seen.status).not.toBe('succeeded');
      await new Promise((r) => setTimeout(r, 20));
    }
    await world.processes.stop(first, 'SIGKILL');
    const atKill = (await world.ctx.pool.query<{ done: number; status: string }>('SELECT done, status FROM service.imports WHERE id = $1', [id])).rows[0]!;
    expect(atKill.status).toBe('running');
    expect(atKill.done).toBeLessThan(rows);

    const second = await world.processes.start('api,projector');
    const finished = await importClient(second.urls.api!, token).finished(id, 240_000);
    expect(finished).toMatchObject({ status: 'succeeded', rows, created: rows, updated: 0, unchanged: 0, rejected: 0, errors: [] });

    const { rows: ids } = await world.ctx.pool.query<{ id: number; external_key: string }>('SELECT id, external_key FROM assets WHERE org_id = $1', [org.id]);
    expect(ids).toHaveLength(rows);
    expect(new Set(ids.map((r) => r.external_key))).toEqual(new Set(keys));
    for (const { id: assetId } of ids) {
      const events = await world.ctx.store.readStream(assetStream(org.id, assetId));
      expect(events.map((e) => e.type)).toEqual(['AssetCreated', 'TagAttached']);
    }
    await world.processes.stop(second);
  }, SLOW);
});

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/tracking.js', ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: world.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn' }, timeout: 120_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

describe('tracking import', () => {
  it('runs the job in the CLI with progress on stderr and prints the finished Import; a refused file exits 2; actor cli', async () => {
    // A projector, and no api process: no worker but the CLI's takes the job.
    const projector = await world.processes.start('projector');
    const org = await createOrg(world.ctx, 'CLI org');
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'import-cli-'));
    const stamp = Date.now().toString(36);
    const csv = path.join(dir, 'locations.csv');
    await fs.writeFile(csv, `external_key,name,parent_external_key\nC-${stamp},Child,P-${stamp}\nP-${stamp},Parent,\n`);

    const dry = await cli(['import', '--org', String(org.id), '--resource', 'locations', '--file', csv, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ status: 'succeeded', dry_run: true, created: 2 });

    const real = await cli(['import', '--org', String(org.id), '--resource', 'locations', '--file', csv]);
    expect(real.code, real.stderr).toBe(0);
    expect(real.stderr).toContain('import');
    const job = JSON.parse(real.stdout) as ImportBody;
    expect(job).toMatchObject({ status: 'succeeded', dry_run: false, rows: 2, created: 2, rejected: 0 });
    const { rows } = await world.ctx.pool.query<{ external_key: string; parent_id: number | null }>('SELECT external_key, parent_id FROM locations WHERE org_id = $1 ORDER BY external_key', [org.id]);
    expect(rows.map((r) => [r.external_key, r.parent_id !== null])).toEqual([
      [`C-${stamp}`, true],
      [`P-${stamp}`, false],
    ]);
    const audit = await world.ctx.pool.query<{ actor_type: string }>(`SELECT actor_type FROM audit_events WHERE org_id = $1 AND action = 'location.created'`, [org.id]);
    expect(audit.rows.map((r) => r.actor_type)).toEqual(['cli', 'cli']);

    const bad = path.join(dir, 'bad.csv');
    await fs.writeFile(bad, 'external_key,colour\nK,red\n');
    const refused = await cli(['import', '--org', String(org.id), '--resource', 'assets', '--file', bad]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('unknown column "colour"');
    await fs.rm(dir, { recursive: true });
    await world.processes.stop(projector);
  }, SLOW);
});
