import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().min(1);

const ROLES = ['api', 'ingest', 'projector'] as const;
export type RoleName = (typeof ROLES)[number];

/** Environment variables of INTERFACES.md (plus a few operational knobs), validated once at start. */
const configSchema = z.object({
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: port.default(8080),
  INGEST_PORT: port.default(8081),
  OPS_PORT: port.default(9464),
  DATA_DIR: z.string().min(1).default('.data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  EVENT_STORE: z.enum(['postgres', 'kurrentdb']).default('postgres'),
  KURRENTDB_URL: z.string().min(1).optional(),
  KAFKA_BROKERS: z.string().min(1).optional(),
  KAFKA_SCAN_TOPIC: z.string().min(1).default('scans.fixed'),
  KAFKA_DLQ_TOPIC: z.string().min(1).default('scans.fixed.dlq'),
  KAFKA_GROUP_ID: z.string().min(1).default('tracking-ingest'),
  ROLES: z
    .string()
    .default('api,ingest,projector')
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
});

export type Config = z.infer<typeof configSchema>;

export class ConfigError extends Error {}

/** Parses the environment; the error names the first bad variable in one line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && value !== '') cleaned[key] = value;
  }
  const parsed = configSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`Invalid configuration: ${variable}: ${issue.message} (got ${JSON.stringify(env[variable] ?? null)})`);
  }
  const config = parsed.data;
  if (config.EVENT_STORE === 'kurrentdb' && !config.KURRENTDB_URL) {
    throw new ConfigError('Invalid configuration: KURRENTDB_URL: required when EVENT_STORE=kurrentdb');
  }
  return config;
}
