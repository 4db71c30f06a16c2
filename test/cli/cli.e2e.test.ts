import { execFile } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer } from '../support/auth.js';
import { createTestDatabase } from '../support/database.js';
import { TEST_SIGNING_KEY_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';

// The CLI as a script uses it: `npx tracking` (bin/tracking.js), outputs made for `$(...)`, exit
// codes. Against the database of a running service, as next to `npm start`.

const ROOT = path.resolve(import.meta.dirname, '../..');
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const SLOW = 120_000;

let svc: TestService;

beforeAll(async () => {
  svc = await startTestService('cli_bin');
});

afterAll(async () => {
  await svc?.stop();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: svc.db.url, SIGNING_KEY_ENCRYPTION_KEY: TEST_SIGNING_KEY_ENCRYPTION_KEY, LOG_LEVEL: 'warn', ...env }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

const tracking = (...args: string[]) => run(process.execPath, ['bin/tracking.js', ...args]);

describe.concurrent('npx tracking', () => {
  it('runs through npx with nothing but the JSON document on stdout', async () => {
    const result = await run('npx', ['tracking', 'orgs', 'list', '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect(Array.isArray(JSON.parse(result.stdout))).toBe(true);
  }, SLOW);

  it('--id-only and --token-only print one value on one line, for $(...)', async () => {
    const created = await tracking('orgs', 'create', '--name', 'Scripted', '--id-only');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^\d+\n$/);
    const orgId = created.stdout.trim();

    const minted = await tracking('keys', 'mint', '--org', orgId, '--name', 'script', '--scopes', 'assets:read', '--token-only');
    expect(minted).toMatchObject({ code: 0, stderr: '' });
    expect(minted.stdout).toMatch(/^[^\n]+\n$/);
    const token = minted.stdout.trim();
    expect(token).toMatch(JWT);
    const me = await fetch(`${svc.apiUrl}/orgs/me`, { headers: bearer(token) });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { data: { id: number } }).data.id).toBe(Number(orgId));

    const session = await tracking('sessions', 'mint', '--user', 'ada@example.com', '--org', orgId, '--token-only');
    expect(session).toMatchObject({ code: 0, stderr: '' });
    expect(session.stdout.trim()).toMatch(JWT);
  }, SLOW);

  it('keys mint without --json prints the token on a line of its own, outside the table', async () => {
    const orgId = (await tracking('orgs', 'create', '--name', 'Readable', '--id-only')).stdout.trim();
    const minted = await tracking('keys', 'mint', '--org', orgId, '--name', 'people', '--scopes', 'assets:read,assets:write');
    expect(minted).toMatchObject({ code: 0, stderr: '' });
    const lines = minted.stdout.split('\n');
    const tokenLines = lines.filter((line) => JWT.test(line));
    expect(tokenLines).toHaveLength(1);
    const token = tokenLines[0]!;
    expect(lines.filter((line) => line.includes(token.slice(-20)))).toEqual([token]);
    expect(lines[0]).toMatch(/^id +name +scopes +expires_at$/);
    expect(minted.stdout).toContain('shown only now');
  }, SLOW);

  it('projections status explains its columns without --json, and keeps its shape with it', async () => {
    const readable = await tracking('projections', 'status');
    expect(readable).toMatchObject({ code: 0, stderr: '' });
    expect(readable.stdout).toMatch(/^name +checkpoint +head +lag_events +lag_seconds +rebuilding +needs_rebuild$/m);
    for (const column of ['checkpoint', 'head', 'lag_events', 'lag_seconds', 'rebuilding', 'needs_rebuild']) expect(readable.stdout).toMatch(new RegExp(`^${column} +\\S`, 'm'));
    const json = await tracking('projections', 'status', '--json');
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const rows = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(Object.keys(row)).toEqual(['name', 'checkpoint', 'head', 'lag_events', 'lag_seconds', 'rebuilding', 'needs_rebuild']);
    // The webhooks role's subscriber, last, with its own checkpoint.
    expect(rows.at(-1)).toMatchObject({ name: 'webhooks', rebuilding: false, lag_events: expect.any(Number) });
  }, SLOW);

  it('logs go to stderr, never into the JSON on stdout (here the CLI runs the projections itself: no service runs on this database)', async () => {
    const db = await createTestDatabase('cli_alone');
    try {
      const created = await run(process.execPath, ['bin/tracking.js', 'orgs', 'create', '--name', 'Alone', '--json'], { DATABASE_URL: db.url, LOG_LEVEL: 'debug' });
      expect(created.code, created.stderr).toBe(0);
      expect(JSON.parse(created.stdout)).toEqual({ id: expect.any(Number), name: 'Alone' });
      expect(created.stderr).toContain('projection active');
    } finally {
      await db.drop();
    }
  }, SLOW);

  it('exit codes: 0 for help, 2 for usage and configuration errors, 1 for a refused command; one line on stderr', async () => {
    const help = await tracking('--help');
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toContain('Usage: tracking');
    const cases: Array<[string[], Record<string, string>, number, string]> = [
      [['orgs', 'lst'], {}, 2, "Did you mean list?"],
      [['keys', 'list', '--org', 'acme'], {}, 2, '--org must be an integer between 1 and 2147483647'],
      [['orgs', 'list'], { PG_POOL_SIZE: 'many' }, 2, 'Invalid configuration: PG_POOL_SIZE'],
      [['keys', 'revoke', 'ak_nope'], {}, 1, 'API key ak_nope does not exist'],
    ];
    const runs = await Promise.all(cases.map(([args, env]) => run(process.execPath, ['bin/tracking.js', ...args, '--json'], env)));
    runs.forEach((result, i) => {
      const [, , code, detail] = cases[i]!;
      expect(result.code, detail).toBe(code);
      expect(result.stdout, detail).toBe('');
      expect(result.stderr, detail).toMatch(/^error: [^\n]+\n$/);
      expect(result.stderr, detail).toContain(detail);
    });
  }, SLOW);
});
