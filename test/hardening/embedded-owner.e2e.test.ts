import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopEmbeddedPostgresAt } from '../../shared/db/embedded.js';
import { freePorts } from '../support/ports.js';

/**
 * The embedded database after a crash (issue 9). `kill -9` of `npm start`'s process group leaves
 * its Postgres running (pg_ctl starts it in a session of its own). The next start on the same
 * DATA_DIR must own that server: stop it on SIGTERM, as it stops one it started itself. A CLI
 * command next to a running service attaches and leaves the server running; a CLI command that finds
 * a dead service's server adopts it for the command and stops it after (docs/cli.md "Which database").
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE_ARGS = ['--import', 'tsx'];

let dataDir: string;
let env: NodeJS.ProcessEnv;
const children = new Set<ChildProcess>();

/** `npm start` as it runs from a terminal: the leader of its own process group. */
function startService(): Promise<{ child: ChildProcess; opsUrl: string }> {
  const child = spawn(process.execPath, [...NODE_ARGS, 'services/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.add(child);
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line in time:\n${out}`)), 90_000);
    child.stdout!.on('data', () => {
      const ops = /ops:\s+(http:\/\/\S+?)\/healthz/.exec(out);
      if (ops && /api:\s+http/.test(out)) {
        clearTimeout(timer);
        resolve({ child, opsUrl: ops[1]! });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`service exited with ${code}:\n${out}`));
    });
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.on('exit', (code) => resolve(code));
  });
}

/** What `kill -9 -<pgid>` does to `npm start` from a terminal. */
async function killGroup(child: ChildProcess): Promise<void> {
  const done = exited(child);
  process.kill(-child.pid!, 'SIGKILL');
  await done;
  children.delete(child);
}

async function terminate(child: ChildProcess): Promise<number | null> {
  const done = exited(child);
  child.kill('SIGTERM');
  const code = await done;
  children.delete(child);
  return code;
}

function cli(...args: string[]) {
  return spawnSync(process.execPath, [...NODE_ARGS, 'services/cli/main.ts', ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 90_000 });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The postmaster's pid from DATA_DIR/pg/postmaster.pid, or null when there is no such file. */
async function postmasterPid(): Promise<number | null> {
  const text = await fs.readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').catch(() => null);
  return text === null ? null : Number(text.split('\n')[0]);
}

/** Postgres processes whose command line names this DATA_DIR (the postmaster's `-D <dir>/pg`). */
function postgresProcessesOfDataDir(): string[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return ps.stdout
    .split('\n')
    .filter((line) => line.includes(path.join(dataDir, 'pg')) && /postgres/.test(line));
}

async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 15_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-owner-'));
  const [port, opsPort, ingestPort] = await freePorts(3);
  env = {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: String(port),
    OPS_PORT: String(opsPort),
    INGEST_PORT: String(ingestPort),
    LOG_LEVEL: 'warn',
  };
  delete env.DATABASE_URL;
});

afterAll(async () => {
  for (const child of children) {
    if (child.pid) process.kill(-child.pid, 'SIGKILL');
  }
  await stopEmbeddedPostgresAt(dataDir).catch(() => undefined);
  await fs.rm(dataDir, { recursive: true, force: true });
});

// Each test starts services and CLI commands as processes of their own: about 40 to 55 s on a
// loaded two-core machine, too near the suite's minute.
describe('the embedded Postgres left running by a killed service', { timeout: 150_000 }, () => {
  it('is owned by the next start, which stops it on SIGTERM', async () => {
    const first = await startService();
    const pgPid = (await postmasterPid())!;
    expect(alive(pgPid)).toBe(true);

    await killGroup(first.child);
    // What the issue found: the database outlives its service.
    expect(alive(pgPid)).toBe(true);

    const second = await startService();
    expect((await fetch(`${second.opsUrl}/readyz`)).status).toBe(200);
    expect(await postmasterPid()).toBe(pgPid); // attached to the orphan, not a second server
    expect(await terminate(second.child)).toBe(0);

    expect(await eventually(() => !alive(pgPid))).toBe(true);
    expect(await postmasterPid()).toBeNull();
    expect(postgresProcessesOfDataDir()).toEqual([]);
  });

  it('is adopted and stopped by a CLI command, while a running service’s server is left running by one', async () => {
    const service = await startService();
    const pgPid = (await postmasterPid())!;
    // Next to a running service: attach, never stop.
    const listed = cli('orgs', 'list', '--json');
    expect(listed.status, listed.stderr).toBe(0);
    expect(alive(pgPid)).toBe(true);
    expect((await fetch(`${service.opsUrl}/readyz`)).status).toBe(200);

    await killGroup(service.child);
    expect(alive(pgPid)).toBe(true);
    // Its owner is dead: the command adopts the server and stops it when done.
    const again = cli('orgs', 'list', '--json');
    expect(again.status, again.stderr).toBe(0);
    expect(await eventually(() => !alive(pgPid))).toBe(true);
    expect(postgresProcessesOfDataDir()).toEqual([]);

    // And a later start begins from a clean slate.
    const third = await startService();
    expect((await fetch(`${third.opsUrl}/readyz`)).status).toBe(200);
    const thirdPid = (await postmasterPid())!;
    expect(await terminate(third.child)).toBe(0);
    expect(await eventually(() => !alive(thirdPid))).toBe(true);
  });
});
