import path from 'node:path';
import { z } from 'zod';
import { KeyEncryptionError, parseKeyEncryptionKey, parseKeyEncryptionKeys } from './auth/key-encryption.js';
import { ConfigError } from './errors.js';
import { registerSecret, registerUrlSecret, redactUrl } from './redaction.js';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().min(1);

/** Days as a positive integer, or `unlimited` (null: nothing is dropped). */
const retentionDays = z.union([z.literal('unlimited').transform(() => null), z.coerce.number().int().min(1)]);
const postgresUrl = z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL');

/** A key-encryption key list (or one key): checked here, parsed where it is used. */
const keyEncryptionKeys = (parse: (text: string) => unknown) =>
  z.string().superRefine((value, ctx) => {
    try {
      parse(value);
    } catch (error) {
      if (!(error instanceof KeyEncryptionError)) throw error;
      ctx.addIssue({ code: 'custom', message: error.message });
    }
  });

/** A domain name as the part of an email address after `@`: labels of letters, digits and `-`, at least two. */
const EMAIL_DOMAIN = /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Why OIDC_ISSUER is not an issuer this service may use, or null. */
function oidcIssuerProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be the provider\'s issuer URL, e.g. https://login.example.com';
  }
  if (url.search || url.hash || url.username || url.password) return 'must be an issuer URL without query, fragment or credentials';
  if (url.protocol === 'https:') return null;
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  return url.protocol === 'http:' && loopback ? null : 'must be an https:// URL (http:// only on localhost, 127.0.0.1 or [::1])';
}

/** Segments by projection name; `all`: for every projection that can be split and is not named. */
export interface ProjectionSegments {
  all: number;
  byName: Record<string, number>;
}

/** The most segments a projection may run as. */
export const MAX_SEGMENTS = 64;

/** PROJECTION_SEGMENTS: `4`, or `tracking=4,webhooks=2`; a reason when it is neither. */
export function parseProjectionSegments(value: string): ProjectionSegments | string {
  const count = (text: string) => (/^[1-9][0-9]*$/.test(text) && Number(text) <= MAX_SEGMENTS ? Number(text) : null);
  const whole = count(value.trim());
  if (whole !== null) return { all: whole, byName: {} };
  const byName: Record<string, number> = {};
  for (const part of value.split(',')) {
    const match = /^\s*([a-z][a-z0-9_-]*)\s*=\s*([0-9]+)\s*$/.exec(part);
    const n = match ? count(match[2]!) : null;
    if (!match || n === null) return `must be a number from 1 to ${MAX_SEGMENTS}, or <projection>=<n>,… (e.g. tracking=4)`;
    byName[match[1]!] = n;
  }
  return { all: 1, byName };
}

const ROLES = ['api', 'ingest', 'projector', 'webhooks'] as const;
export type RoleName = (typeof ROLES)[number];

/** Environment variables (docs/operations.md "Configuration"), validated once at start. */
const configSchema = z.object({
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: port.default(8080),
  INGEST_PORT: port.default(8081),
  OPS_PORT: port.default(9464),
  /**
   * Where people reach the service (the web application's links, its Origin check, and its
   * cookie's Secure flag when https); `http://HOST:PORT` when unset.
   */
  PUBLIC_URL: z
    .string()
    .regex(/^https?:\/\/[^/?#\s]+\/?$/, 'must be an http:// or https:// origin, e.g. https://tracking.example.com')
    .transform((value) => value.replace(/\/$/, ''))
    .optional(),
  /**
   * Single sign-on (docs/web-app.md, "Single sign-on"): the OpenID provider's issuer, on when set.
   * https://, or http:// on a loopback host (a provider on this machine, as in development).
   */
  OIDC_ISSUER: z
    .string()
    .superRefine((value, ctx) => {
      const problem = oidcIssuerProblem(value);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional(),
  /** The client id and secret the OpenID provider registered for this service. */
  OIDC_CLIENT_ID: z.string().min(1).max(1024).optional(),
  OIDC_CLIENT_SECRET: z.string().min(1).max(4096).optional(),
  /** Email domains whose people join OIDC_DEFAULT_ORG as viewers on their first SSO sign-in: a comma list, lower-cased. */
  OIDC_ALLOWED_DOMAINS: z
    .string()
    .transform((value, ctx) => {
      const domains = value.split(',').map((d) => d.trim().toLowerCase()).filter(Boolean);
      const bad = domains.find((d) => !EMAIL_DOMAIN.test(d));
      if (bad !== undefined || domains.length === 0) {
        ctx.addIssue({ code: 'custom', message: `${bad === undefined ? 'no domain given' : `"${bad}" is not an email domain`} (a comma list such as example.com,example.org)` });
        return z.NEVER;
      }
      return [...new Set(domains)];
    })
    .optional(),
  /** The organization (its id) people of OIDC_ALLOWED_DOMAINS join; it must exist when the service starts. */
  OIDC_DEFAULT_ORG: z.coerce.number().int().min(1).max(2147483647).optional(),
  /** Whether a proxy in front sets X-Forwarded-Proto (the web application's cookie is then Secure behind TLS). */
  TRUST_PROXY: z.enum(['true', 'false']).default('false').transform((value) => value === 'true'),
  DATA_DIR: z.string().min(1).default('.data'),
  /** Where scan events moved out of the log go (`archiveDir`): a mounted volume in production; `DATA_DIR/archive` when unset. */
  ARCHIVE_DIR: z.string().min(1).optional(),
  /** The service's own connection (with MIGRATION_DATABASE_URL: its runtime role). */
  DATABASE_URL: postgresUrl.optional(),
  /** Migrations, grants and key re-encryption; DATABASE_URL when unset. */
  MIGRATION_DATABASE_URL: postgresUrl.optional(),
  /** The read-only connection handed to analysts; none when unset with DATABASE_URL. */
  ANALYST_DATABASE_URL: postgresUrl.optional(),
  SIGNING_KEY_ENCRYPTION_KEY: keyEncryptionKeys(parseKeyEncryptionKeys).optional(),
  /** Read only by `keys rotate-encryption-key`. */
  NEW_SIGNING_KEY_ENCRYPTION_KEY: keyEncryptionKeys(parseKeyEncryptionKey).optional(),
  EVENT_STORE: z.enum(['postgres', 'kurrentdb']).default('postgres'),
  /** A KurrentDB connection string (the client's schemes; `?tls=false` for an insecure server). */
  KURRENTDB_URL: z
    .string()
    .regex(/^(kurrentdb|kurrent|kdb|esdb)(\+discover)?:\/\/\S+$/, 'must be a kurrentdb:// connection string (or kurrentdb+discover://)')
    .optional(),
  KAFKA_BROKERS: z.string().min(1).optional(),
  KAFKA_SCAN_TOPIC: z.string().min(1).default('scans.fixed'),
  KAFKA_DLQ_TOPIC: z.string().min(1).default('scans.fixed.dlq'),
  KAFKA_GROUP_ID: z.string().min(1).default('tracking-ingest'),
  /** After the Kafka consumer has not consumed for this long (stopped, restarting), /healthz answers 503. */
  KAFKA_CONSUMER_UNHEALTHY_SECONDS: z.coerce.number().positive().default(60),
  /** Fixed-reader scans over MQTT: an mqtt:// or mqtts:// broker; unset, no MQTT subscriber. */
  MQTT_URL: z.string().regex(/^mqtts?:\/\/\S+$/, 'must be an mqtt:// or mqtts:// URL').optional(),
  /** Topic filters (a comma list), each subscribed as `$share/<MQTT_SHARE_GROUP>/<filter>` at QoS 1. */
  MQTT_TOPICS: z.string().min(1).default('scans/fixed/#'),
  MQTT_SHARE_GROUP: z.string().regex(/^[^/+#\s]+$/, 'no "/", "+", "#" or spaces').default('tracking-ingest'),
  MQTT_USERNAME: z.string().min(1).optional(),
  MQTT_PASSWORD: z.string().min(1).optional(),
  /** With mqtts://: PEM CA certificates to trust instead of Node's public ones (a private CA). */
  MQTT_CA_FILE: z.string().min(1).optional(),
  /** With mqtts://: a PEM client certificate and its unencrypted private key, for brokers that require them (mutual TLS). */
  MQTT_CERT_FILE: z.string().min(1).optional(),
  MQTT_KEY_FILE: z.string().min(1).optional(),
  /** The persistent session's client id, stable across restarts; `tracking-ingest-<hostname>` when unset. */
  MQTT_CLIENT_ID: z.string().min(1).max(65535).optional(),
  /** How long the broker keeps the session (and queues its messages) while this process is away. */
  MQTT_SESSION_EXPIRY_SECONDS: z.coerce.number().int().min(1).max(4294967295).default(86400),
  /** After the MQTT subscriber has been disconnected this long, /healthz answers 503. */
  MQTT_UNHEALTHY_SECONDS: z.coerce.number().positive().default(60),
  ROLES: z
    .string()
    .default('api,ingest,projector,webhooks')
    .transform((value, ctx) => {
      const roles = value.split(',').map((r) => r.trim()).filter(Boolean);
      for (const role of roles) {
        if (!(ROLES as readonly string[]).includes(role)) {
          ctx.addIssue({ code: 'custom', message: `unknown role "${role}" (expected ${ROLES.join(', ')})` });
          return z.NEVER;
        }
      }
      if (roles.length === 0) {
        ctx.addIssue({ code: 'custom', message: 'at least one role is required' });
        return z.NEVER;
      }
      return roles as RoleName[];
    }),
  ENVIRONMENT: z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" and "-" only').default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  RATE_LIMIT_PER_MINUTE: positiveInt.default(600),
  RATE_LIMIT_BURST: positiveInt.default(1200),
  PG_POOL_SIZE: positiveInt.default(20),
  /**
   * Webhook delivery to loopback, private and link-local addresses (docs/operations.md
   * "Webhooks"); unset: allowed only when ENVIRONMENT=development (see loadConfig).
   */
  WEBHOOK_ALLOW_PRIVATE_TARGETS: z.enum(['true', 'false']).transform((value) => value === 'true').optional(),
  /** Deliveries one webhooks process sends at the same time. */
  WEBHOOK_CONCURRENCY: positiveInt.max(256).default(32),
  /** Test-only: multiplies the retry schedule's delays (e.g. 0.001 turns 5 minutes into 0.3 s). */
  WEBHOOK_RETRY_SCALE: z.coerce.number().positive().max(1).default(1),
  /** Test-only: how long a receiver has to answer; the contract's 10 s otherwise. */
  WEBHOOK_TIMEOUT_MS: positiveInt.max(10_000).default(10_000),
  /** Days a finished webhook delivery (delivered or given up) is kept after it was queued; `unlimited` keeps all. */
  WEBHOOK_DELIVERY_RETENTION_DAYS: retentionDays.default(30),
  /** After the database has been unreachable this long, /healthz answers 503 (a supervisor restarts). */
  DB_OUTAGE_UNHEALTHY_SECONDS: z.coerce.number().positive().default(30),
  /**
   * Segments of each projection that can be split (docs/design.md "Segmented processors"): one
   * number for all of them, or `<name>=<n>,…` (the others stay at 1).
   */
  PROJECTION_SEGMENTS: z
    .string()
    .transform((value, ctx) => {
      const parsed = parseProjectionSegments(value);
      if (typeof parsed === 'string') {
        ctx.addIssue({ code: 'custom', message: parsed });
        return z.NEVER;
      }
      return parsed;
    })
    .default({ all: 1, byName: {} }),
  /** How long a projector's claim of a segment lasts without renewal: a stopped or cut-off process's segments are taken over after it. */
  PROJECTOR_LEASE_SECONDS: z.coerce.number().int().min(1).max(600).default(10),
  /** Days of per-read detail (the reads behind visits) `tracking retention run` keeps; `unlimited` keeps all. */
  SCAN_RETENTION_DAYS: retentionDays.default(90),
  /** Days of visits (history) `tracking retention run` keeps; `unlimited` keeps all. */
  HISTORY_RETENTION_DAYS: retentionDays.default(400),
});

export type Config = Omit<z.infer<typeof configSchema>, 'WEBHOOK_ALLOW_PRIVATE_TARGETS'> & { WEBHOOK_ALLOW_PRIVATE_TARGETS: boolean };

/** The brokers KAFKA_BROKERS names (comma-separated, blanks ignored); none when it is unset. */
export function kafkaBrokers(config: Pick<Config, 'KAFKA_BROKERS'>): string[] {
  return (config.KAFKA_BROKERS ?? '').split(',').map((broker) => broker.trim()).filter(Boolean);
}

/** The service's public base URL: PUBLIC_URL, or the public listener's address. */
export function publicUrl(config: Pick<Config, 'PUBLIC_URL' | 'HOST' | 'PORT'>): string {
  if (config.PUBLIC_URL) return config.PUBLIC_URL;
  const host = ['0.0.0.0', '::'].includes(config.HOST) ? '127.0.0.1' : config.HOST;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.PORT}`;
}

/** The scan archive's directory (docs/operations.md "The scan archive"): ARCHIVE_DIR, or `archive` in DATA_DIR. */
export function archiveDir(config: Pick<Config, 'ARCHIVE_DIR' | 'DATA_DIR'>): string {
  return config.ARCHIVE_DIR ?? path.join(config.DATA_DIR, 'archive');
}

/** Every variable the service reads (`.env.example` lists each one; a test keeps them in step). */
export const CONFIG_VARIABLES = Object.keys(configSchema.shape) as Array<keyof Config>;

/** Variables whose values are secrets: never quoted in an error, and masked in every log line. */
const SECRET_KEYS = ['SIGNING_KEY_ENCRYPTION_KEY', 'NEW_SIGNING_KEY_ENCRYPTION_KEY', 'MQTT_PASSWORD', 'OIDC_CLIENT_SECRET'] as const;
const SECRET_URLS = ['DATABASE_URL', 'MIGRATION_DATABASE_URL', 'ANALYST_DATABASE_URL', 'KURRENTDB_URL', 'MQTT_URL'] as const;

/** A key as given, and in both of its encodings (a log could quote either). */
function registerKeySecret(text: string): void {
  registerSecret(text);
  try {
    const { secret } = parseKeyEncryptionKey(text);
    registerSecret(secret.toString('base64'));
    registerSecret(secret.toString('base64url'));
  } catch {
    // Not a key: the error names the variable and quotes nothing.
  }
}

function shownValue(variable: string, value: string | undefined): string {
  if (value === undefined) return 'null';
  if ((SECRET_KEYS as readonly string[]).includes(variable)) return 'a value not shown';
  if ((SECRET_URLS as readonly string[]).includes(variable)) return JSON.stringify(redactUrl(value));
  return JSON.stringify(value);
}

/**
 * Single sign-on's variables go together: OIDC_ISSUER needs the client's id and secret and
 * PUBLIC_URL (the callback is built on it); the others mean nothing without OIDC_ISSUER, and the
 * domains and the organization they join need each other. Whether OIDC_DEFAULT_ORG names an
 * organization is checked when the api role starts (it needs the log).
 */
function checkSingleSignOn(config: Config): void {
  const others = ['OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'OIDC_ALLOWED_DOMAINS', 'OIDC_DEFAULT_ORG'] as const;
  if (!config.OIDC_ISSUER) {
    const given = others.find((name) => config[name] !== undefined);
    if (given) throw new ConfigError(`Invalid configuration: ${given}: only used with OIDC_ISSUER (single sign-on)`);
    return;
  }
  for (const name of ['OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'PUBLIC_URL'] as const) {
    if (config[name] === undefined) throw new ConfigError(`Invalid configuration: ${name}: required with OIDC_ISSUER (single sign-on)`);
  }
  if (config.OIDC_ALLOWED_DOMAINS && config.OIDC_DEFAULT_ORG === undefined) {
    throw new ConfigError('Invalid configuration: OIDC_DEFAULT_ORG: required with OIDC_ALLOWED_DOMAINS (the organization their people join)');
  }
  if (config.OIDC_DEFAULT_ORG !== undefined && !config.OIDC_ALLOWED_DOMAINS) {
    throw new ConfigError('Invalid configuration: OIDC_ALLOWED_DOMAINS: required with OIDC_DEFAULT_ORG (the email domains whose people join it)');
  }
}

/** Whether single sign-on is on (docs/web-app.md, "Single sign-on"). */
export function singleSignOnEnabled(config: Pick<Config, 'OIDC_ISSUER'>): boolean {
  return config.OIDC_ISSUER !== undefined;
}

/**
 * Parses the environment; the error names the first bad variable in one line. The secrets it
 * holds are registered for redaction, so no log line or printed error can carry them.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && value !== '') cleaned[key] = value;
  }
  for (const name of SECRET_KEYS) for (const part of (cleaned[name] ?? '').split(',')) registerKeySecret(part.trim());
  for (const name of SECRET_URLS) registerUrlSecret(cleaned[name]);
  // Whole, too: a client secret may hold commas.
  registerSecret(cleaned.OIDC_CLIENT_SECRET);
  const parsed = configSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`Invalid configuration: ${variable}: ${issue.message} (got ${shownValue(variable, env[variable])})`);
  }
  const config: Config = {
    ...parsed.data,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: parsed.data.WEBHOOK_ALLOW_PRIVATE_TARGETS ?? parsed.data.ENVIRONMENT === 'development',
  };
  for (const name of ['MIGRATION_DATABASE_URL', 'ANALYST_DATABASE_URL'] as const) {
    if (config[name] && !config.DATABASE_URL) {
      throw new ConfigError(`Invalid configuration: ${name}: only used with DATABASE_URL (the embedded default creates its own roles)`);
    }
  }
  // Visits outlive their reads, never the other way round: a late read splits a visit from the reads it holds.
  if ((config.HISTORY_RETENTION_DAYS ?? Infinity) < (config.SCAN_RETENTION_DAYS ?? Infinity)) {
    throw new ConfigError(`Invalid configuration: HISTORY_RETENTION_DAYS: must be at least SCAN_RETENTION_DAYS (got ${shownValue('HISTORY_RETENTION_DAYS', env.HISTORY_RETENTION_DAYS)})`);
  }
  for (const name of ['MQTT_CA_FILE', 'MQTT_CERT_FILE', 'MQTT_KEY_FILE'] as const) {
    if (config[name] && !config.MQTT_URL?.startsWith('mqtts://')) {
      throw new ConfigError(`Invalid configuration: ${name}: only used with an mqtts:// MQTT_URL`);
    }
  }
  if (Boolean(config.MQTT_CERT_FILE) !== Boolean(config.MQTT_KEY_FILE)) {
    const [given, missing] = config.MQTT_CERT_FILE ? ['MQTT_CERT_FILE', 'MQTT_KEY_FILE'] : ['MQTT_KEY_FILE', 'MQTT_CERT_FILE'];
    throw new ConfigError(`Invalid configuration: ${missing}: required with ${given} (a client certificate goes with its private key)`);
  }
  checkSingleSignOn(config);
  if (config.EVENT_STORE === 'kurrentdb' && !config.KURRENTDB_URL) {
    throw new ConfigError('Invalid configuration: KURRENTDB_URL: required when EVENT_STORE=kurrentdb');
  }
  // Each listener needs its own port; 0 (any free port, as tests use) is never a conflict.
  const listeners = [
    ['PORT', config.PORT],
    ['INGEST_PORT', config.INGEST_PORT],
    ['OPS_PORT', config.OPS_PORT],
  ] as const;
  for (const [i, [name, value]] of listeners.entries()) {
    const clash = listeners.slice(i + 1).find(([, other]) => value !== 0 && other === value);
    if (clash) throw new ConfigError(`Invalid configuration: ${name} and ${clash[0]}: both are ${value}; each listener needs its own port`);
  }
  return config;
}
