import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardResponses, unguardResponses } from '../support/openapi-guard.js';
import { freePorts } from '../support/ports.js';

// README "The two commands": `npm start` runs everything on an embedded Postgres under
// DATA_DIR, prints the URLs, stops cleanly on SIGINT/SIGTERM, and a second start keeps the data.
// The CLI reaches the same database whether or not the server runs.

const ROOT = path.resolve(import.meta.dirname, '../..');
// Same as `npm start` / `npm run cli`: tsx as an in-process loader, so signals reach the service itself.
const NODE_ARGS = ['--import', 'tsx'];

let dataDir: string;
let env: NodeJS.ProcessEnv;

/** The api listener of each started server, guarded until the server exits. */
const guardedApis = new Map<ChildProcess, string>();

type Started = { child: ChildProcess; output: () => string; apiUrl: string; opsUrl: string };

/**
 * Starts the service and waits for its ready line. Each start listens on ports free at that
 * moment: a port free at the file's start may be another process's by a restart, on a busy machine.
 * Even chosen just before, a port may be taken before the service binds it (`npm start` builds the
 * console and starts Postgres first, seconds in which any outgoing connection of the machine may
 * draw it as its own port): a start that fails so is tried again on other ports, twice.
 */
async function startServer(command: [string, ...string[]] = [process.execPath, ...NODE_ARGS, 'services/main.ts'], given: NodeJS.ProcessEnv = env): Promise<Started> {
  for (let attempt = 1; ; attempt++) {
    const [port, opsPort, ingestPort] = await freePorts(3);
    try {
      return await startOnce(command, { ...given, PORT: String(port), OPS_PORT: String(opsPort), INGEST_PORT: String(ingestPort) });
    } catch (error) {
      if (attempt === 3 || !(error instanceof Error) || !/EADDRINUSE/.test(error.message)) throw error;
    }
  }
}

async function startOnce(command: [string, ...string[]], serverEnv: NodeJS.ProcessEnv): Promise<Started> {
  const child = spawn(command[0], command.slice(1), { cwd: ROOT, env: serverEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line in time:\n${out}`)), 90_000);
    const check = () => {
      const api = /api:\s+(http:\/\/\S+)/.exec(out);
      const ops = /ops:\s+(http:\/\/\S+?)\/healthz/.exec(out);
      if (api && ops) {
        clearTimeout(timer);
        // Its answers are checked against its document like a test service's (openapi-guard.ts).
        const apiUrl = api[1]!;
        guardedApis.set(child, apiUrl);
        guardResponses(apiUrl, new URL('/openapi/v1.json', apiUrl).href).then(() => resolve({ child, output: () => out, apiUrl, opsUrl: ops[1]! }), reject);
      }
    };
    child.stdout!.on('data', check);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}`));
    });
  });
}

function stopServer(child: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.on('exit', (code) => {
      const apiUrl = guardedApis.get(child);
      if (apiUrl !== undefined) unguardResponses(apiUrl);
      resolve(code);
    });
    child.kill(signal);
  });
}

function cli(...args: string[]) {
  const result = spawnSync(process.execPath, [...NODE_ARGS, 'services/cli/main.ts', ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 90_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Users of the client connections to the application database, other than this one (as the superuser). */
async function connectedUsers(): Promise<string[]> {
  const port = (await fs.readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[3]!.trim();
  const password = (await fs.readFile(path.join(dataDir, 'postgres.password'), 'utf8')).trim();
  const client = new pg.Client({ host: '127.0.0.1', port: Number(port), user: 'postgres', password, database: 'tracking' });
  await client.connect();
  try {
    const result = await client.query<{ user: string }>(
      `SELECT DISTINCT usename AS user FROM pg_stat_activity WHERE datname = 'tracking' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
    );
    return result.rows.map((r) => r.user);
  } finally {
    await client.end();
  }
}

async function postgresRunning(dir = dataDir): Promise<boolean> {
  try {
    const lines = (await fs.readFile(path.join(dir, 'pg', 'postmaster.pid'), 'utf8')).split('\n');
    return alive(Number(lines[0]));
  } catch {
    return false;
  }
}

/** Pids of the processes under `pid` (children, grandchildren...). */
function descendants(pid: number): Array<{ pid: number; args: string }> {
  const table = spawnSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' })
    .stdout.split('\n')
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[3]! }));
  const found: Array<{ pid: number; args: string }> = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.pop()!;
    for (const row of table.filter((r) => r.ppid === parent)) {
      found.push({ pid: row.pid, args: row.args });
      queue.push(row.pid);
    }
  }
  return found;
}

beforeAll(async () => {
  // A mktemp -d style folder (mode 700): the service must make it usable for Postgres itself.
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-start-'));
  await fs.chmod(dataDir, 0o700);
  const [port, opsPort, ingestPort] = await freePorts(3);
  env = { ...process.env, DATA_DIR: dataDir, PORT: String(port), OPS_PORT: String(opsPort), INGEST_PORT: String(ingestPort), LOG_LEVEL: 'warn' };
  delete env.DATABASE_URL;
});

afterAll(async () => {
  await fs.rm(dataDir, { recursive: true, force: true });
});

/** Several service starts and CLI processes, each a second or more of CPU: on a shared machine these take a while. */
const SLOW = 180_000;
const LIFECYCLE = SLOW;

describe('npm start on embedded Postgres', () => {
  it('starts, serves, stops cleanly on SIGTERM, and keeps its data across restarts', async () => {
    const first = await startServer();
    expect(first.apiUrl).toMatch(/\/api\/v1$/);
    const health = await fetch(`${first.opsUrl}/healthz`);
    expect(health.status).toBe(200);

    // The embedded default's secrets are 0600 files in DATA_DIR, and the service connects as the
    // runtime role, not as the superuser (docs/operations.md, "Secrets: the signing keys and their encryption" and "Database roles").
    for (const name of ['signing-key-encryption.key', 'tracking_migrator.password', 'tracking_runtime.password', 'tracking_analyst.password']) {
      expect((await fs.stat(path.join(dataDir, name))).mode & 0o777, name).toBe(0o600);
    }
    expect(await connectedUsers()).toEqual(['tracking_runtime']);

    // The CLI attaches to the running server's database.
    const created = cli('orgs', 'create', '--name', 'Persisted Org', '--json');
    expect(created.status, created.stderr).toBe(0);
    const org = JSON.parse(created.stdout) as { id: number; name: string };
    expect(org.name).toBe('Persisted Org');

    const minted = cli('keys', 'mint', '--org', String(org.id), '--name', 'writer', '--scopes', 'assets:read,assets:write', '--json');
    expect(minted.status, minted.stderr).toBe(0);
    const token = (JSON.parse(minted.stdout) as { token: string }).token;

    // SIGTERM while creates are in flight: each one either completes (and survives the restart)
    // or is refused; none fails half-way.
    const creates = Array.from({ length: 60 }, (_, i) =>
      fetch(`${first.apiUrl}/assets`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: `in-flight ${i}` }),
      }).then(
        async (response) => ({ status: response.status, body: (await response.json()) as { data?: { id: number } } }),
        () => ({ status: 0, body: {} as { data?: { id: number } } }),
      ),
    );
    // Signal once the server is demonstrably busy with them.
    await Promise.race(creates);
    const exit = stopServer(first.child, 'SIGTERM');
    const outcomes = await Promise.all(creates);
    expect(await exit).toBe(0);
    expect(await postgresRunning()).toBe(false);
    for (const outcome of outcomes) expect([0, 201, 503]).toContain(outcome.status);
    const acknowledged = outcomes.filter((o) => o.status === 201).map((o) => o.body.data!.id);
    expect(acknowledged.length).toBeGreaterThan(0);

    // The CLI starts the embedded database itself when no server runs, and stops it after.
    const listed = cli('orgs', 'list', '--json');
    expect(listed.status, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as Array<{ id: number }>).map((o) => o.id)).toContain(org.id);
    expect(await postgresRunning()).toBe(false);

    const second = await startServer();
    try {
      // A data folder belongs to one running service: another start on it refuses with one line
      // naming the running one, and leaves it serving.
      const [otherPort, otherOps, otherIngest] = await freePorts(3);
      const refused = spawnSync(process.execPath, [...NODE_ARGS, 'services/main.ts'], {
        cwd: ROOT,
        env: { ...env, PORT: String(otherPort), OPS_PORT: String(otherOps), INGEST_PORT: String(otherIngest) },
        encoding: 'utf8',
        timeout: 90_000,
      });
      expect(refused.status, refused.stderr).toBe(1);
      const refusal = refused.stderr.trim().split('\n');
      expect(refusal).toHaveLength(1);
      expect(refusal[0]).toContain(`in use by the tracking service running as pid ${second.child.pid}`);
      expect(refusal[0]).toContain(second.apiUrl);
      expect((await fetch(`${second.opsUrl}/healthz`)).status).toBe(200);
      expect(await postgresRunning()).toBe(true);

      const again = cli('orgs', 'list', '--json');
      expect(again.status, again.stderr).toBe(0);
      expect((JSON.parse(again.stdout) as Array<{ name: string }>).map((o) => o.name)).toContain('Persisted Org');
      for (const id of acknowledged) {
        const response = await fetch(`${second.apiUrl}/assets/${id}`, { headers: { Authorization: `Bearer ${token}` } });
        expect(response.status).toBe(200);
      }
    } finally {
      expect(await stopServer(second.child, 'SIGINT')).toBe(0);
    }
    expect(await postgresRunning()).toBe(false);
  }, LIFECYCLE);

  it('SIGTERM to npm alone, as a supervisor sends it to `npm start`, stops the service and its Postgres gracefully', async () => {
    const npmDataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-npm-start-'));
    const npmEnv = { ...env, DATA_DIR: npmDataDir };
    let service: Array<{ pid: number }> = [];
    try {
      const server = await startServer(['npm', 'start'], npmEnv);
      service = descendants(server.child.pid!).filter((p) => /^\S*node\s.*services\/main\.ts/.test(p.args));
      expect(service).toHaveLength(1);
      expect(await postgresRunning(npmDataDir)).toBe(true);
      expect((await fetch(`${server.opsUrl}/healthz`)).status).toBe(200);

      // Only npm gets the signal (kill <pid>, not the process group).
      expect(await stopServer(server.child, 'SIGTERM')).toBe(0);
      const deadline = Date.now() + 30_000;
      while (alive(service[0]!.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(alive(service[0]!.pid)).toBe(false);
      expect(await postgresRunning(npmDataDir)).toBe(false);
      // Stopped cleanly: the clean shutdown removes postmaster.pid.
      await expect(fs.access(path.join(npmDataDir, 'pg', 'postmaster.pid'))).rejects.toThrow();
    } finally {
      // On failure, stop what was left running before its data goes.
      for (const { pid } of service) if (alive(pid)) process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 300 && (await postgresRunning(npmDataDir)); i++) await new Promise((r) => setTimeout(r, 100));
      await fs.rm(npmDataDir, { recursive: true, force: true });
    }
  }, LIFECYCLE);

  it('refuses a bad configuration value with one line naming the variable', () => {
    const result = spawnSync(process.execPath, [...NODE_ARGS, 'services/main.ts'], {
      cwd: ROOT,
      env: { ...env, PORT: 'not-a-port' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(result.status).not.toBe(0);
    const lines = result.stderr.trim().split('\n').filter((l) => !l.startsWith('npm warn'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('PORT');
  });
});
