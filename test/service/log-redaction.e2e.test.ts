import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { databaseTarget } from '../../shared/db/connections.js';
import { revokeApiKey } from '../../shared/domain/orgs-and-keys/commands.js';
import { createLogger } from '../../shared/logger.js';
import { startService, type RunningService } from '../../services/service.js';
import { guardResponses, unguardResponses } from '../support/openapi-guard.js';
import { bearer, createOrg, mintApiKey, mintSession } from '../support/auth.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Issue 16: every secret the service handles stays out of its logs. A session at `debug` level
 * (the service's configuration and connections logged at start, every request logged) mints
 * keys in process and through the CLI, uses them over HTTP, including where they do not belong
 * (in a path, in another header), and the whole log is then searched for each secret.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

let db: TestDatabase;
let service: RunningService;
let log = '';
const kek = randomBytes(32);

beforeAll(async () => {
  db = await createTestDatabase('log_redaction');
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log += chunk.toString();
      done();
    },
  });
  const config = loadConfig({
    PORT: '0',
    OPS_PORT: '0',
    LOG_LEVEL: 'debug',
    ROLES: 'api,projector',
    DATABASE_URL: db.url,
    SIGNING_KEY_ENCRYPTION_KEY: kek.toString('base64'),
  });
  const logger = createLogger(config.LOG_LEVEL, 'tracking', sink);
  service = await startService(config, await databaseTarget(config, null), logger);
  // Its answers are checked against its document like a test service's (openapi-guard.ts).
  await guardResponses(service.urls.api!, new URL('/openapi/v1.json', service.urls.api!).href);
});

afterAll(async () => {
  if (service) unguardResponses(service.urls.api!);
  await service?.stop();
  await db?.drop();
});

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      TSX,
      ['services/cli/main.ts', ...args],
      {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: db.url, SIGNING_KEY_ENCRYPTION_KEY: kek.toString('base64url'), LOG_LEVEL: 'debug', NODE_NO_WARNINGS: '1' },
        timeout: 60_000,
      },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** Lines of pino output (the CLI logs to stderr, with any other line it writes there). */
function logLines(text: string): string[] {
  return text.split('\n').filter((line) => line.startsWith('{"level":'));
}

describe('logs of a session that mints and uses keys', () => {
  it('never contain a token, its signature, a database password or the key-encryption key', async () => {
    const ctx = service.ctx;
    const org = await createOrg(ctx, 'Redaction');
    const key = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read', 'assets:write'] });
    const session = await mintSession(ctx, { user: 'ops@example.com', orgId: org.id });
    const revoked = await mintApiKey(ctx, { orgId: org.id, scopes: ['assets:read'] });
    await revokeApiKey(ctx, revoked.id);

    const [cliKey, cliSession] = await Promise.all([
      cli('keys', 'mint', '--org', String(org.id), '--name', 'cli', '--scopes', 'assets:read', '--json'),
      cli('sessions', 'mint', '--user', 'cli@example.com', '--json'),
    ]);
    expect(cliKey.code, cliKey.stderr).toBe(0);
    expect(cliSession.code, cliSession.stderr).toBe(0);
    const cliToken = (JSON.parse(cliKey.stdout) as { token: string }).token;
    const cliSessionToken = (JSON.parse(cliSession.stdout) as { token: string }).token;

    const api = service.urls.api!;
    const requests: Array<[string, RequestInit, number]> = [
      [`${api}/orgs/me`, { headers: bearer(key.token) }, 200],
      [`${api}/orgs/me`, { headers: bearer(cliToken) }, 200],
      [`${api}/assets`, { method: 'POST', headers: { ...bearer(key.token), 'content-type': 'application/json' }, body: JSON.stringify({ name: key.token.slice(-20) }) }, 201],
      [`${api}/assets`, { headers: bearer(session.token) }, 200],
      [`${api}/orgs/me`, { headers: bearer(revoked.token) }, 401],
      // Where a token does not belong: in the path and query, in another header, mangled.
      [`${api}/assets/${key.token}?token=${cliSessionToken}`, { headers: bearer(key.token) }, 400],
      [`${api}/orgs/me`, { headers: { 'x-api-key': key.token } }, 401],
      [`${api}/orgs/me`, { headers: { authorization: `Token ${key.token}` } }, 401],
      [`${api}/orgs/me`, { headers: bearer(`${key.token}x`) }, 401],
    ];
    for (const [url, init, status] of requests) {
      const response = await fetch(url, init);
      await response.arrayBuffer();
      expect(response.status, url).toBe(status);
    }
    await service.ctx.log.flush();

    const everything = [log, cliKey.stderr, cliSession.stderr].join('\n');
    // The log is a real one: the configuration, the connections and every request are in it.
    expect(log).toContain('"msg":"opening the service context"');
    expect(log).toContain('"DATABASE_URL":"postgres://');
    expect(log).toContain('"SIGNING_KEY_ENCRYPTION_KEY":"[redacted]"');
    // One line a request, once its response is sent: the request, its status and time, its id (shared/http/access-log.ts).
    expect(log).not.toContain('"msg":"incoming request"');
    const completed = logLines(log)
      .map((line) => JSON.parse(line) as { msg: string; reqId?: string; req?: { method: string; url: string }; res?: { statusCode: number }; responseTime?: number })
      .filter((line) => line.msg === 'request completed' && line.req?.url.startsWith('/api/v1/'));
    expect(completed.map((line) => [line.req!.method, line.res!.statusCode])).toEqual(requests.map(([, init, status]) => [init.method ?? 'GET', status]));
    for (const line of completed) {
      expect(line.reqId).toMatch(/^.{10,}$/);
      expect(line.responseTime).toBeGreaterThan(0);
    }
    expect(logLines(cliKey.stderr).length).toBeGreaterThan(0);
    expect(logLines(cliSession.stderr).length).toBeGreaterThan(0);

    const password = decodeURIComponent(new URL(db.url).password);
    const secrets: Record<string, string> = {
      'database password': password,
      'key-encryption key (base64)': kek.toString('base64'),
      'key-encryption key (base64url)': kek.toString('base64url'),
    };
    for (const [name, token] of Object.entries({ key: key.token, session: session.token, revoked: revoked.token, cliToken, cliSessionToken })) {
      secrets[`${name} token`] = token;
      secrets[`${name} token signature`] = token.split('.')[2]!;
      secrets[`${name} token claims`] = token.split('.')[1]!;
    }
    expect(password.length).toBeGreaterThan(0);
    for (const [name, secret] of Object.entries(secrets)) expect(everything.includes(secret), name).toBe(false);
  }, 120_000);
});
