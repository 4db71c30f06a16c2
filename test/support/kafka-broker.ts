import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A real Apache Kafka broker for the tests: one KRaft node that is broker and controller at once,
 * run from the `org.apache.kafka:kafka_2.13` jars (test/support/kafka-broker/pom.xml), which Maven
 * copies once, with every runtime dependency, into `.cache/kafka-broker/lib` (git-ignored).
 *
 * Start-up is what matters here: a small heap, the serial collector, C1 only, no group join delay,
 * every internal topic with one replica and one partition. Format and start take about 6 s.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const POM = path.join('test', 'support', 'kafka-broker', 'pom.xml');
export const KAFKA_BROKER_LIB = path.join(ROOT, '.cache', 'kafka-broker', 'lib');
/** The gateway of the tests: Apache Kafka's Java producer as a single-file program. */
export const GATEWAY_SOURCE = path.join(ROOT, 'test', 'support', 'kafka-broker', 'Gateway.java');
/** The pid file of the broker's JVM in its folder, for the collector of abandoned runs. */
export const BROKER_PID_FILE = 'broker.pid';

const JVM_OPTIONS = ['-Xms128m', '-Xmx512m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-XX:-UsePerfData', '-Djava.awt.headless=true'];

export interface KafkaBroker {
  /** Bootstrap address, `127.0.0.1:<port>`. */
  readonly brokers: string;
  /** The broker's `log.dirs`: a partition's segments are in `<logDir>/<topic>-<partition>/`. */
  readonly logDir: string;
  /**
   * Stops the JVM (SIGTERM: a clean shutdown, so the next start runs no recovery over the
   * segments) and starts it again on the same port and data, running `whileStopped` in between.
   */
  restart(whileStopped?: () => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

/** Why no real broker can run here (no Java 17+), or null when one can. */
export function kafkaBrokerUnavailable(): string | null {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.error || java.status !== 0) return 'no Java on PATH (Apache Kafka 4 needs Java 17 or later)';
  const version = /version "(\d+)/.exec(java.stderr)?.[1];
  if (version && Number(version) < 17) return `Java ${version} on PATH; Apache Kafka 4 needs Java 17 or later`;
  return null;
}

/** Copies the broker's jars with Maven, once (a stamp file names the pom they came from). */
export async function ensureKafkaBrokerJars(): Promise<void> {
  const pom = await fs.readFile(path.join(ROOT, POM), 'utf8');
  const stamp = path.join(KAFKA_BROKER_LIB, '.pom');
  if ((await fs.readFile(stamp, 'utf8').catch(() => '')) === pom) return;
  await fs.rm(KAFKA_BROKER_LIB, { recursive: true, force: true });
  const mvn = spawnSync('mvn', ['-q', '-B', '-f', POM, 'dependency:copy-dependencies'], { cwd: ROOT, encoding: 'utf8' });
  if (mvn.error) throw new Error(`the Kafka broker's jars are missing and Maven could not run (${mvn.error.message}); install maven`);
  if (mvn.status !== 0) throw new Error(`mvn could not fetch the Kafka broker's jars:\n${mvn.stdout}${mvn.stderr}`);
  await fs.writeFile(stamp, pom);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const logDirOf = (dir: string) => path.join(dir, 'data');

function serverProperties(dir: string, port: number, controllerPort: number): string {
  return [
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
    `listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${port}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    `log.dirs=${logDirOf(dir)}`,
    // Topics a test does not create itself (a dead-letter topic) get several partitions too.
    'auto.create.topics.enable=true',
    'num.partitions=4',
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=4',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'transaction.state.log.num.partitions=4',
    'share.coordinator.state.topic.replication.factor=1',
    'share.coordinator.state.topic.min.isr=1',
    'group.initial.rebalance.delay.ms=0',
    // Nothing waits on disk: the data is thrown away after the run.
    'log.flush.interval.messages=9223372036854775807',
    'num.network.threads=2',
    'num.io.threads=2',
    'background.threads=2',
    'log.cleaner.enable=false',
    '',
  ].join('\n');
}

function java(args: string[], logFile: string): ChildProcess {
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn('java', [...JVM_OPTIONS, '-cp', path.join(KAFKA_BROKER_LIB, '*'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  return child;
}

async function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

async function tail(file: string): Promise<string> {
  return (await fs.readFile(file, 'utf8').catch(() => '')).split('\n').slice(-30).join('\n');
}

/**
 * Formats a fresh KRaft log folder in `dir` and starts the broker on free ports. `dir` is the
 * caller's (a temporary folder); the broker's pid is written there as `broker.pid`.
 */
export async function startKafkaBroker(dir: string): Promise<KafkaBroker> {
  await ensureKafkaBrokerJars();
  const [port, controllerPort] = [await freePort(), await freePort()];
  const properties = path.join(dir, 'server.properties');
  const logFile = path.join(dir, 'broker.log');
  await fs.writeFile(properties, serverProperties(dir, port, controllerPort));
  // As Kafka's own Uuid.randomUuid: never one that starts with '-', which the format tool would read as an option.
  let clusterId = randomBytes(16).toString('base64url');
  while (clusterId.startsWith('-')) clusterId = randomBytes(16).toString('base64url');
  const format = java(['kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', properties], logFile);
  if ((await exited(format)) !== 0) throw new Error(`kafka-storage format failed:\n${await tail(logFile)}`);

  let child: ChildProcess | null = null;
  const launch = async () => {
    const started = java(['kafka.Kafka', properties], logFile);
    child = started;
    await fs.writeFile(path.join(dir, BROKER_PID_FILE), String(started.pid));
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => {
        started.kill('SIGKILL');
        reject(new Error(`the Kafka broker did not start in 90 s:\n${out.slice(-3000)}`));
      }, 90_000);
      const onData = (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('Kafka Server started')) {
          clearTimeout(timer);
          started.stdout!.off('data', onData);
          started.stderr!.off('data', onData);
          resolve();
        } else if (out.length > 1_000_000) out = out.slice(-10_000);
      };
      // slf4j-simple logs on stderr.
      started.stdout!.on('data', onData);
      started.stderr!.on('data', onData);
      started.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the Kafka broker exited (${code}) while starting:\n${out.slice(-3000)}`));
      });
    });
  };
  const halt = async () => {
    const running = child;
    child = null;
    if (!running) return;
    running.kill('SIGTERM');
    const timer = setTimeout(() => running.kill('SIGKILL'), 20_000);
    await exited(running);
    clearTimeout(timer);
  };
  await launch();
  return {
    brokers: `127.0.0.1:${port}`,
    logDir: logDirOf(dir),
    async restart(whileStopped) {
      await halt();
      await whileStopped?.();
      await launch();
    },
    stop: halt,
  };
}

/** A temporary folder for a broker of its own (the restart test's), removed by `stop`. */
export async function startPrivateKafkaBroker(): Promise<KafkaBroker> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tracking-test-kafka-'));
  await fs.writeFile(path.join(dir, 'owner.pid'), String(process.pid));
  try {
    const broker = await startKafkaBroker(dir);
    return {
      brokers: broker.brokers,
      logDir: broker.logDir,
      restart: (whileStopped) => broker.restart(whileStopped),
      async stop() {
        await broker.stop();
        await fs.rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    if (existsSync(dir)) await fs.rm(dir, { recursive: true, force: true });
    throw error;
  }
}
