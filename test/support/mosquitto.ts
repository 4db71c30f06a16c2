import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePorts } from './ports.js';

/**
 * A real Eclipse Mosquitto broker (the Debian package `mosquitto`) for the MQTT tests: started on
 * a free port with a generated configuration, persistence on, in a folder of its own. global-setup
 * starts one per run; a test that restarts a broker starts its own (startPrivateMosquitto).
 */

export const MOSQUITTO_PID_FILE = 'mosquitto.pid';

/** The mosquitto executable, or null. Debian installs it in /usr/sbin, which a user's PATH may lack. */
export function mosquittoBinary(): string | null {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/usr/local/sbin', '/opt/homebrew/sbin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, 'mosquitto');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  return null;
}

export interface Mosquitto {
  /** e.g. mqtt://127.0.0.1:41234, or mqtts:// with a TLS listener */
  url: string;
  port: number;
  dir: string;
  /** Graceful stop (SIGTERM): mosquitto writes its persistence file on the way out. */
  stop(): Promise<void>;
  /** kill -9: nothing is written on the way out; what the last save missed is gone. */
  kill(): Promise<void>;
  /** Starts it again after a stop, on the same port, from the same persistence file. */
  resume(): Promise<void>;
}

function config(dir: string, port: number, extra: readonly string[]): string {
  return [
    `listener ${port} 127.0.0.1`,
    ...(extra.some((line) => line.startsWith('allow_anonymous')) ? [] : ['allow_anonymous true']),
    // Sessions, subscriptions and queued messages survive a restart: written on shutdown and every
    // `autosave_interval` seconds (a crash loses what came since the last write).
    'persistence true',
    `persistence_location ${dir}${path.sep}`,
    'autosave_interval 1',
    // A persistent session's messages while its client is away, and QoS 1 messages in flight to a
    // client (its receive maximum caps them too): the subscriber records what arrives in batches.
    'max_queued_messages 100000',
    'max_inflight_messages 1000',
    'persistent_client_expiration 1d',
    ...(process.getuid?.() === 0 ? ['user root'] : []),
    `log_dest file ${path.join(dir, 'mosquitto.log')}`,
    'log_type error',
    'log_type warning',
    'log_type notice',
    'log_type information',
    ...extra,
    '',
  ].join('\n');
}

async function passwd(file: string, user: string, password: string): Promise<void> {
  const binary = mosquittoBinary();
  const tool = binary ? path.join(path.dirname(binary), '..', 'bin', 'mosquitto_passwd') : 'mosquitto_passwd';
  const candidates = [tool, 'mosquitto_passwd'];
  for (const candidate of candidates) {
    const code = await new Promise<number>((resolve) => spawn(candidate, ['-b', file, user, password], { stdio: 'ignore' }).once('exit', (c) => resolve(c ?? 1)).once('error', () => resolve(127)));
    if (code === 0) return;
  }
  throw new Error('mosquitto_passwd failed or is not installed');
}

async function accepting(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`mosquitto did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts mosquitto in `dir` (created), on `port` or a free one; `extra` lines end its configuration. */
export async function startMosquitto(dir: string, port?: number, extra: readonly string[] = [], scheme: 'mqtt' | 'mqtts' = 'mqtt'): Promise<Mosquitto> {
  const binary = mosquittoBinary();
  if (!binary) throw new Error('mosquitto is not installed');
  await fsp.mkdir(dir, { recursive: true });
  const chosen = port ?? (await freePorts(1))[0]!;
  const conf = path.join(dir, 'mosquitto.conf');
  await fsp.writeFile(conf, config(dir, chosen, extra));
  let child: ChildProcess | null = null;
  const launch = async () => {
    const started = spawn(binary, ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    started.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const exited = new Promise<never>((_, reject) => started.once('exit', (code) => reject(new Error(`mosquitto exited (${code}): ${stderr.trim()}`))));
    exited.catch(() => undefined);
    await Promise.race([accepting(chosen, 10_000), exited]);
    await fsp.writeFile(path.join(dir, MOSQUITTO_PID_FILE), String(started.pid));
    child = started;
  };
  const end = (signal: NodeJS.Signals) => async () => {
    const running = child;
    child = null;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill(signal);
    await exited;
  };
  await launch();
  return {
    url: `${scheme}://127.0.0.1:${chosen}`,
    port: chosen,
    dir,
    stop: end('SIGTERM'),
    kill: end('SIGKILL'),
    resume: launch,
  };
}

export interface PrivateMosquittoOptions {
  /** Users and their passwords; anonymous clients are then refused. */
  users?: Record<string, string>;
  /** A TLS listener (mqtts://) with this server certificate; with `clientCa`, clients must present a certificate it signed. */
  tls?: { cert: string; key: string; clientCa?: string };
  /** More configuration lines, e.g. `autosave_on_changes true`. */
  extra?: readonly string[];
}

/** A broker of the test's own (one it may stop and resume), in a temporary folder; `remove` stops it and deletes the folder. */
export async function startPrivateMosquitto(options: PrivateMosquittoOptions = {}): Promise<Mosquitto & { remove(): Promise<void> }> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'tracking-mosquitto-'));
  const extra: string[] = [];
  if (options.tls) {
    // Settings of the one listener (they follow its `listener` line in effect).
    extra.push(`certfile ${options.tls.cert}`, `keyfile ${options.tls.key}`);
    if (options.tls.clientCa) extra.push(`cafile ${options.tls.clientCa}`, 'require_certificate true');
  }
  if (options.users) {
    // Users and passwords, hashed by mosquitto_passwd (installed beside mosquitto); anonymous clients refused.
    const file = path.join(dir, 'passwords');
    await fsp.writeFile(file, '');
    for (const [user, password] of Object.entries(options.users)) await passwd(file, user, password);
    extra.push('allow_anonymous false', `password_file ${file}`);
  }
  extra.push(...(options.extra ?? []));
  const broker = await startMosquitto(dir, undefined, extra, options.tls ? 'mqtts' : 'mqtt');
  return {
    ...broker,
    async remove() {
      await broker.stop();
      await fsp.rm(dir, { recursive: true, force: true });
    },
  };
}
