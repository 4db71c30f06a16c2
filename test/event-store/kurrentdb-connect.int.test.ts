import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { createLogger } from '../../shared/logger.js';
import { openKurrentDbEventStore } from '../../shared/event-store/kurrentdb.js';
import { UnsupportedServerError } from '../../shared/event-store/kurrentdb-translation.js';
import { EventStoreUnavailableError } from '../../shared/event-store/port.js';
import { openContext } from '../../services/open-context.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { rejectionOf } from '../support/rejection.js';

/**
 * Starting on KurrentDB without a KurrentDB: the real client against a port where nothing listens,
 * and against a stand-in gRPC server that answers only what the client asks first, the server's
 * features and version (`ServerFeatures.GetSupportedMethods`), as a KurrentDB of that version
 * would. The stand-in uses the client's own gRPC library and message definitions.
 */

const fromClient = createRequire(createRequire(import.meta.url).resolve('@kurrent/kurrentdb-client'));
const grpc = fromClient('@grpc/grpc-js') as typeof import('@grpc/grpc-js');
const features = fromClient('../generated/kurrentdb/protocols/v1/serverfeatures_grpc_pb.js') as {
  ServerFeaturesService: import('@grpc/grpc-js').ServiceDefinition;
};
const messages = fromClient('../generated/kurrentdb/protocols/v1/serverfeatures_pb.js') as {
  SupportedMethods: new () => { setEventStoreServerVersion(v: string): unknown; setMethodsList(m: unknown[]): unknown };
};

/** A gRPC server on a free port; `version` null: it does not implement ServerFeatures (as before 21.10). */
async function standInServer(version: string | null): Promise<{ url: string; stop(): Promise<void> }> {
  const server = new grpc.Server();
  if (version !== null) {
    server.addService(features.ServerFeaturesService, {
      getSupportedMethods: (_call: unknown, callback: (error: null, reply: unknown) => void) => {
        const reply = new messages.SupportedMethods();
        reply.setEventStoreServerVersion(version);
        reply.setMethodsList([]);
        callback(null, reply);
      },
    });
  }
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return {
    url: `kurrentdb://127.0.0.1:${port}?tls=false`,
    stop: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}

async function closedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('opening the KurrentDB event store', () => {
  it('accepts a server of 25.1 or later, and knows its version', async () => {
    for (const version of ['25.1.0', '26.0.1.77']) {
      const server = await standInServer(version);
      try {
        const store = await openKurrentDbEventStore(server.url);
        expect(store.name).toBe('kurrentdb');
        expect(store.serverVersion.major * 100 + store.serverVersion.minor).toBeGreaterThanOrEqual(2501);
        await store.close();
      } finally {
        await server.stop();
      }
    }
  });

  it("warns of an option the client does not know without quoting the connection string's password", async () => {
    const password = 'kurrent-secret-password';
    const server = await standInServer('25.1.0');
    const warnings: string[] = [];
    const warn = vi.spyOn(console, 'warn').mockImplementation((...parts: unknown[]) => void warnings.push(parts.map(String).join(' ')));
    try {
      const store = await openKurrentDbEventStore(server.url.replace('//', `//admin:${password}@`) + '&keepAliveTimout=5000');
      await store.close();
    } finally {
      warn.mockRestore();
      await server.stop();
    }
    expect(warnings).toEqual(['Unknown option key "keepAliveTimout", setting will be ignored.']);
  });

  it('refuses an older server, or one that does not say which it is', async () => {
    for (const [version, message] of [
      ['24.10.4', 'the server runs KurrentDB 24.10.4; KurrentDB 25.1 or later is required (atomic multi-stream appends)'],
      ['23.10.0', 'the server runs KurrentDB 23.10.0;'],
      [null, 'the server does not report its version; KurrentDB 25.1 or later is required'],
    ] as const) {
      const server = await standInServer(version);
      try {
        const error = await rejectionOf(openKurrentDbEventStore(server.url));
        expect(error).toBeInstanceOf(UnsupportedServerError);
        expect((error as Error).message).toContain(message);
      } finally {
        await server.stop();
      }
    }
  });

  it('an unreachable server fails promptly with EventStoreUnavailableError', async () => {
    const started = Date.now();
    const error = await rejectionOf(openKurrentDbEventStore(`kurrentdb://127.0.0.1:${await closedPort()}?tls=false`));
    expect(error).toBeInstanceOf(EventStoreUnavailableError);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('the service context with EVENT_STORE=kurrentdb', () => {
  let db: TestDatabase;
  const log = createLogger('silent');

  beforeAll(async () => {
    db = await createTestDatabase('kurrentdb_context');
  });
  afterAll(async () => {
    await db?.drop();
  });

  const config = (url: string) => loadConfig({ EVENT_STORE: 'kurrentdb', KURRENTDB_URL: url, LOG_LEVEL: 'silent', PG_POOL_SIZE: '2' });

  it('an older server stops the start with one line naming KURRENTDB_URL, the server and its version', async () => {
    const server = await standInServer('24.2.0');
    try {
      const error = await rejectionOf(openContext(config(server.url), db.url, log));
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toBe(
        `Invalid configuration: KURRENTDB_URL: ${server.url}: the server runs KurrentDB 24.2.0; KurrentDB 25.1 or later is required (atomic multi-stream appends)`,
      );
    } finally {
      await server.stop();
    }
  });

  it('the service process exits with 2 and that one line on stderr', async () => {
    const server = await standInServer('24.10.4');
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', 'services/main.ts'], {
        cwd: path.resolve(import.meta.dirname, '../..'),
        env: {
          ...process.env,
          DATABASE_URL: db.url,
          SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
          EVENT_STORE: 'kurrentdb',
          KURRENTDB_URL: server.url,
          PORT: '0',
          INGEST_PORT: '0',
          OPS_PORT: '0',
          LOG_LEVEL: 'silent',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(code).toBe(2);
      expect(stderr.trim().split('\n')).toEqual([
        `Invalid configuration: KURRENTDB_URL: ${server.url}: the server runs KurrentDB 24.10.4; KurrentDB 25.1 or later is required (atomic multi-stream appends)`,
      ]);
    } finally {
      await server.stop();
    }
  });

  it('a connection string the client refuses is a configuration error that does not quote it', async () => {
    const password = 'kurrent-secret-password';
    const error = await rejectionOf(openContext(config(`kurrentdb://admin:${password}@localhost:notaport?tls=false`), db.url, log));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/^Invalid configuration: KURRENTDB_URL: not a connection string the KurrentDB client accepts/);
    expect((error as Error).message).not.toContain(password);
    expect((error as Error).message.split('\n')).toHaveLength(1);
  });

  it('an unreachable server stops the start, naming KURRENTDB_URL without its password', async () => {
    const password = 'kurrent-secret-password';
    const url = `kurrentdb://admin:${password}@127.0.0.1:${await closedPort()}?tls=false`;
    const error = await rejectionOf(openContext(config(url), db.url, log));
    expect(error).toBeInstanceOf(EventStoreUnavailableError);
    expect((error as Error).message).toMatch(/^KurrentDB unreachable at KURRENTDB_URL \(kurrentdb:\/\/admin:\[redacted\]@127\.0\.0\.1:\d+\?tls=false\)/);
    expect((error as Error).message).not.toContain(password);
  });
});
