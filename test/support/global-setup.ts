import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, stopEmbeddedPostgresAt, type EmbeddedPostgres } from '../../shared/db/embedded.js';
import { applyAllMigrations } from '../../shared/db/migrate.js';
import { createPool } from '../../shared/db/pool.js';
import { BROKER_PID_FILE, kafkaBrokerUnavailable, startKafkaBroker } from './kafka-broker.js';
import { startMockKafka } from './mock-kafka.js';
import { MOSQUITTO_PID_FILE, mosquittoBinary, startMosquitto } from './mosquitto.js';
import { chromiumMissing } from './browser.js';
import { buildConsole } from '../../services/api/console/web/build.js';

export const TEMPLATE_DATABASE = 'tracking_template';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string;
    templateDatabase: string;
    /** Bootstrap address of the run's Kafka broker (Apache Kafka, or librdkafka's mock cluster without Java). */
    kafkaBrokers: string;
    /** Which broker the run has: tests of what only a real broker does skip (and are counted) on the mock. */
    kafkaBrokerKind: 'apache-kafka' | 'mock';
    /** The run's Mosquitto broker (mqtt://127.0.0.1:<port>), or '' where mosquitto is not installed (the MQTT tests skip). */
    mqttUrl: string;
  }
}

const RUN_DIR_PREFIX = 'tracking-test-';
const OWNER_FILE = 'owner.pid';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A run that was killed (a CI timeout, Ctrl-C twice) never reaches its teardown and leaves its
 * Postgres running. Stop and remove those of dead runs; the server of a run still going is left
 * alone (its owner pid is alive).
 */
async function removeAbandonedRuns(): Promise<void> {
  const tmp = os.tmpdir();
  for (const name of await fs.readdir(tmp).catch(() => [] as string[])) {
    if (!name.startsWith(RUN_DIR_PREFIX)) continue;
    const dir = path.join(tmp, name);
    const owner = Number(await fs.readFile(path.join(dir, OWNER_FILE), 'utf8').catch(() => '0'));
    if (owner > 0 && alive(owner)) continue;
    if (owner === 0) {
      // No owner file yet: a run may be starting right now; only collect it when clearly stale.
      const stat = await fs.stat(dir).catch(() => null);
      if (!stat || Date.now() - stat.mtimeMs < 10 * 60_000) continue;
    }
    await stopEmbeddedPostgresAt(dir).catch(() => undefined);
    await stopAbandonedBroker(dir);
    await stopAbandonedMosquitto(dir);
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** A dead run's Kafka JVM, named by its pid file, checked to be that JVM before it is stopped. */
async function stopAbandonedBroker(dir: string): Promise<void> {
  const pid = Number(await fs.readFile(path.join(dir, 'kafka', BROKER_PID_FILE), 'utf8').catch(() => '0'));
  if (!(pid > 0) || !alive(pid)) return;
  const command = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (command.includes('kafka.Kafka')) process.kill(pid, 'SIGKILL');
}

/** A dead run's mosquitto, named by its pid file, checked to be mosquitto before it is stopped. */
async function stopAbandonedMosquitto(dir: string): Promise<void> {
  const pid = Number(await fs.readFile(path.join(dir, 'mosquitto', MOSQUITTO_PID_FILE), 'utf8').catch(() => '0'));
  if (!(pid > 0) || !alive(pid)) return;
  const command = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (command.includes('mosquitto')) process.kill(pid, 'SIGKILL');
}

/** The run's MQTT broker: Mosquitto, or none (said in one line) where it is not installed. */
async function startRunMosquitto(runDir: string): Promise<{ url: string; stop(): Promise<void> }> {
  if (!mosquittoBinary()) {
    if (process.env.TEST_MQTT_BROKER === 'mosquitto') throw new Error('TEST_MQTT_BROKER=mosquitto, but mosquitto is not installed');
    console.warn('mqtt: mosquitto is not installed (apt-get install mosquitto): the MQTT tests are skipped');
    return { url: '', stop: async () => undefined };
  }
  return startMosquitto(path.join(runDir, 'mosquitto'));
}

/**
 * The run's Kafka broker: Apache Kafka (a KRaft node from the jars Maven fetches) wherever Java
 * runs; without Java, librdkafka's mock cluster (through kcat), said in one line. TEST_KAFKA_BROKER
 * `apache` requires the real broker (`.ci/run` sets it), `mock` asks for the mock cluster.
 */
async function startRunBroker(runDir: string): Promise<{ brokers: string; kind: 'apache-kafka' | 'mock'; stop(): Promise<void> }> {
  const wanted = process.env.TEST_KAFKA_BROKER;
  const missing = wanted === 'mock' ? 'TEST_KAFKA_BROKER=mock' : kafkaBrokerUnavailable();
  if (missing && wanted === 'apache') throw new Error(`TEST_KAFKA_BROKER=apache, but ${missing}`);
  if (missing) {
    console.warn(`kafka: ${missing}: the Kafka tests run against librdkafka's mock cluster; those that need a real broker are skipped`);
    return { ...(await startMockKafka()), kind: 'mock' };
  }
  const dir = path.join(runDir, 'kafka');
  await fs.mkdir(dir, { recursive: true });
  const started = Date.now();
  const broker = await startKafkaBroker(dir);
  if (process.env.TEST_LOG) console.warn(`kafka: Apache Kafka broker at ${broker.brokers} in ${Date.now() - started} ms`);
  return { brokers: broker.brokers, kind: 'apache-kafka', stop: () => broker.stop() };
}

/**
 * One Postgres for the whole run (embedded, in a temporary folder, or TEST_DATABASE_URL's server),
 * and one migrated template database that every test file clones into its own database.
 */
export default async function setup(project: TestProject) {
  let server: EmbeddedPostgres | null = null;
  await removeAbandonedRuns();
  const runDir = await fs.mkdtemp(path.join(os.tmpdir(), RUN_DIR_PREFIX));
  await fs.writeFile(path.join(runDir, OWNER_FILE), String(process.pid));
  // The broker's JVM starts while Postgres initialises and migrates.
  const kafkaStarting = startRunBroker(runDir);
  kafkaStarting.catch(() => undefined);
  const mosquittoStarting = startRunMosquitto(runDir);
  mosquittoStarting.catch(() => undefined);
  // The console's pages, built when stale, as `npm start` does (services/api/console/web/build.ts).
  const consoleBuilding = buildConsole();
  consoleBuilding.catch(() => undefined);
  const missingBrowser = chromiumMissing();
  if (missingBrowser && process.env.CI === 'true') throw new Error(`the console's browser tests need Chromium: ${missingBrowser}`);
  if (missingBrowser) console.warn(`console: ${missingBrowser}: the browser tests are skipped`);
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    server = await startEmbeddedPostgres({ dataDir: runDir, database: 'postgres', unsafeFast: true });
    adminUrl = server.url;
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE}`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DATABASE}`);
  await admin.end();

  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${TEMPLATE_DATABASE}`;
  const pool = createPool(templateUrl.toString(), { max: 2 });
  await applyAllMigrations(pool);
  await pool.end();

  project.provide('postgresAdminUrl', adminUrl);
  project.provide('templateDatabase', TEMPLATE_DATABASE);
  const kafka = await kafkaStarting;
  project.provide('kafkaBrokers', kafka.brokers);
  project.provide('kafkaBrokerKind', kafka.kind);
  const mosquitto = await mosquittoStarting;
  project.provide('mqttUrl', mosquitto.url);
  await consoleBuilding;

  return async () => {
    await kafka.stop();
    await mosquitto.stop();
    await server?.stop();
    await fs.rm(runDir, { recursive: true, force: true });
  };
}
