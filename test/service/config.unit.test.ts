import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, kafkaBrokers, loadConfig, singleSignOnEnabled } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';

// docs/operations.md "Configuration": defaults, and one clear line naming a bad variable.
describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      HOST: '127.0.0.1',
      PORT: 8080,
      INGEST_PORT: 8081,
      OPS_PORT: 9464,
      DATA_DIR: '.data',
      EVENT_STORE: 'postgres',
      KAFKA_SCAN_TOPIC: 'scans.fixed',
      KAFKA_DLQ_TOPIC: 'scans.fixed.dlq',
      KAFKA_GROUP_ID: 'tracking-ingest',
      ROLES: ['api', 'ingest', 'projector', 'webhooks'],
      ENVIRONMENT: 'development',
      LOG_LEVEL: 'info',
      DB_OUTAGE_UNHEALTHY_SECONDS: 30,
      MQTT_TOPICS: 'scans/fixed/#',
      MQTT_SHARE_GROUP: 'tracking-ingest',
      MQTT_SESSION_EXPIRY_SECONDS: 86400,
      MQTT_UNHEALTHY_SECONDS: 60,
    });
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.MQTT_URL).toBeUndefined();
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['OPS_PORT', '-1'],
    ['EVENT_STORE', 'mongo'],
    ['ROLES', 'api,web'],
    ['LOG_LEVEL', 'loud'],
    ['DATABASE_URL', 'mysql://x'],
    ['KURRENTDB_URL', 'http://localhost:2113'],
    ['DB_OUTAGE_UNHEALTHY_SECONDS', '0'],
    ['MQTT_URL', 'tcp://broker:1883'],
    ['MQTT_SHARE_GROUP', 'a/b'],
    ['MQTT_UNHEALTHY_SECONDS', '0'],
  ])('refuses %s=%s with one line naming the variable', (name, value) => {
    let error: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain(name);
    expect(message.split('\n')).toHaveLength(1);
  });

  it.each([
    [{ PORT: '9000', OPS_PORT: '9000' }, 'PORT and OPS_PORT'],
    [{ PORT: '9000', INGEST_PORT: '9000' }, 'PORT and INGEST_PORT'],
    [{ INGEST_PORT: '9000', OPS_PORT: '9000' }, 'INGEST_PORT and OPS_PORT'],
    [{ OPS_PORT: '8080' }, 'PORT and OPS_PORT'],
  ])('refuses two listeners on one port (%j) with one line naming both variables', (env, names) => {
    let error: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain(names);
    expect(message.split('\n')).toHaveLength(1);
  });

  it('port 0 (any free port) on several listeners is not a conflict', () => {
    expect(loadConfig({ PORT: '0', OPS_PORT: '0', INGEST_PORT: '0' })).toMatchObject({ PORT: 0, OPS_PORT: 0, INGEST_PORT: 0 });
  });

  it('requires KURRENTDB_URL with EVENT_STORE=kurrentdb', () => {
    expect(() => loadConfig({ EVENT_STORE: 'kurrentdb' })).toThrow(/KURRENTDB_URL/);
  });

  it('takes the KurrentDB connection strings the client does', () => {
    for (const url of ['kurrentdb://localhost:2113?tls=false', 'kurrentdb+discover://admin:changeit@cluster.example:2113', 'esdb://a:2113,b:2113,c:2113']) {
      expect(loadConfig({ EVENT_STORE: 'kurrentdb', KURRENTDB_URL: url }).KURRENTDB_URL).toBe(url);
    }
  });

  it('never quotes the password of a KurrentDB connection string it refuses', () => {
    const password = 'kurrent-password-not-to-show';
    expect(() => loadConfig({ KURRENTDB_URL: `https://admin:${password}@kurrent.example:2113` })).toThrow(ConfigError);
    try {
      loadConfig({ KURRENTDB_URL: `https://admin:${password}@kurrent.example:2113` });
    } catch (error) {
      expect((error as Error).message).toContain('KURRENTDB_URL');
      expect((error as Error).message).not.toContain(password);
    }
  });

  it('takes mqtt:// and mqtts:// broker URLs, and never quotes the password of one it refuses or of MQTT_PASSWORD', () => {
    expect(loadConfig({ MQTT_URL: 'mqtts://ingest:secret@broker.example:8883' }).MQTT_URL).toBe('mqtts://ingest:secret@broker.example:8883');
    expect(loadConfig({ MQTT_URL: 'mqtt://127.0.0.1:1883' }).MQTT_URL).toBe('mqtt://127.0.0.1:1883');
    const password = 'mqtt-password-not-to-show';
    expect(() => loadConfig({ MQTT_URL: `http://ingest:${password}@broker:1883` })).toThrow(ConfigError);
    try {
      loadConfig({ MQTT_URL: `http://ingest:${password}@broker:1883` });
    } catch (error) {
      expect((error as Error).message).toContain('MQTT_URL');
      expect((error as Error).message).not.toContain(password);
    }
  });

  it('takes the MQTT TLS files only with an mqtts:// MQTT_URL, and a client certificate only with its key (and the reverse)', () => {
    const tls = { MQTT_URL: 'mqtts://broker.example:8883', MQTT_CA_FILE: 'ca.crt', MQTT_CERT_FILE: 'ingest.crt', MQTT_KEY_FILE: 'ingest.key' };
    expect(loadConfig(tls)).toMatchObject(tls);
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refusal({ MQTT_URL: 'mqtt://broker.example:1883', MQTT_CA_FILE: 'ca.crt' })).toBe('Invalid configuration: MQTT_CA_FILE: only used with an mqtts:// MQTT_URL');
    expect(refusal({ MQTT_KEY_FILE: 'ingest.key' })).toBe('Invalid configuration: MQTT_KEY_FILE: only used with an mqtts:// MQTT_URL');
    expect(refusal({ ...tls, MQTT_KEY_FILE: '' })).toBe('Invalid configuration: MQTT_KEY_FILE: required with MQTT_CERT_FILE (a client certificate goes with its private key)');
    expect(refusal({ ...tls, MQTT_CERT_FILE: '' })).toBe('Invalid configuration: MQTT_CERT_FILE: required with MQTT_KEY_FILE (a client certificate goes with its private key)');
  });

  it('reads the retention in days or `unlimited`; history is kept at least as long as per-read detail', () => {
    expect(loadConfig({})).toMatchObject({ SCAN_RETENTION_DAYS: 90, HISTORY_RETENTION_DAYS: 400 });
    expect(loadConfig({ SCAN_RETENTION_DAYS: '30', HISTORY_RETENTION_DAYS: 'unlimited' })).toMatchObject({ SCAN_RETENTION_DAYS: 30, HISTORY_RETENTION_DAYS: null });
    expect(loadConfig({ SCAN_RETENTION_DAYS: 'unlimited', HISTORY_RETENTION_DAYS: 'unlimited' })).toMatchObject({ SCAN_RETENTION_DAYS: null, HISTORY_RETENTION_DAYS: null });
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refusal({ SCAN_RETENTION_DAYS: '0' })).toMatch(/^Invalid configuration: SCAN_RETENTION_DAYS: /);
    expect(refusal({ HISTORY_RETENTION_DAYS: 'forever' })).toMatch(/^Invalid configuration: HISTORY_RETENTION_DAYS: /);
    expect(refusal({ SCAN_RETENTION_DAYS: '90', HISTORY_RETENTION_DAYS: '30' })).toBe('Invalid configuration: HISTORY_RETENTION_DAYS: must be at least SCAN_RETENTION_DAYS (got "30")');
    expect(refusal({ SCAN_RETENTION_DAYS: 'unlimited' })).toBe('Invalid configuration: HISTORY_RETENTION_DAYS: must be at least SCAN_RETENTION_DAYS (got null)');
  });

  it('single sign-on: off by default; OIDC_ISSUER with its client, PUBLIC_URL, and the domains with the organization they join', () => {
    const defaults = loadConfig({});
    expect([defaults.OIDC_ISSUER, defaults.OIDC_CLIENT_ID, defaults.OIDC_ALLOWED_DOMAINS, defaults.OIDC_DEFAULT_ORG]).toEqual([undefined, undefined, undefined, undefined]);
    expect(singleSignOnEnabled(loadConfig({}))).toBe(false);
    const sso = { OIDC_ISSUER: 'https://login.example.com/realms/acme', OIDC_CLIENT_ID: 'tracking', OIDC_CLIENT_SECRET: 'a-client-secret-of-some-length', PUBLIC_URL: 'https://tracking.example.com' };
    const config = loadConfig({ ...sso, OIDC_ALLOWED_DOMAINS: ' Example.com,example.org, example.com ', OIDC_DEFAULT_ORG: '7' });
    expect(config).toMatchObject({ ...sso, OIDC_ALLOWED_DOMAINS: ['example.com', 'example.org'], OIDC_DEFAULT_ORG: 7 });
    expect(singleSignOnEnabled(config)).toBe(true);
    // A provider on this machine may speak plain HTTP; an issuer keeps its trailing slash (it is compared as given).
    for (const issuer of ['http://localhost:3000', 'http://127.0.0.1:3000/', 'http://[::1]:3000', 'https://tenant.example.com/']) {
      expect(loadConfig({ ...sso, OIDC_ISSUER: issuer }).OIDC_ISSUER).toBe(issuer);
    }

    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as Error).message.split('\n')).toHaveLength(1);
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refusal({ ...sso, OIDC_ISSUER: 'http://login.example.com' })).toBe(
      'Invalid configuration: OIDC_ISSUER: must be an https:// URL (http:// only on localhost, 127.0.0.1 or [::1]) (got "http://login.example.com")',
    );
    expect(refusal({ ...sso, OIDC_ISSUER: 'login.example.com' })).toMatch(/^Invalid configuration: OIDC_ISSUER: must be the provider's issuer URL/);
    expect(refusal({ ...sso, OIDC_ISSUER: 'https://login.example.com/?tenant=1' })).toMatch(/^Invalid configuration: OIDC_ISSUER: must be an issuer URL without query/);
    for (const name of ['OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'PUBLIC_URL']) {
      expect(refusal({ ...sso, [name]: '' })).toBe(`Invalid configuration: ${name}: required with OIDC_ISSUER (single sign-on)`);
    }
    expect(refusal({ ...sso, OIDC_ALLOWED_DOMAINS: 'example.com' })).toBe('Invalid configuration: OIDC_DEFAULT_ORG: required with OIDC_ALLOWED_DOMAINS (the organization their people join)');
    expect(refusal({ ...sso, OIDC_DEFAULT_ORG: '7' })).toBe('Invalid configuration: OIDC_ALLOWED_DOMAINS: required with OIDC_DEFAULT_ORG (the email domains whose people join it)');
    for (const domains of ['example', 'exa mple.com', '@example.com', 'example.com,-x.org', ' , ']) {
      expect(refusal({ ...sso, OIDC_ALLOWED_DOMAINS: domains, OIDC_DEFAULT_ORG: '7' }), domains).toMatch(/^Invalid configuration: OIDC_ALLOWED_DOMAINS: /);
    }
    for (const org of ['acme', '0', '1.5', '2147483648']) {
      expect(refusal({ ...sso, OIDC_ALLOWED_DOMAINS: 'example.com', OIDC_DEFAULT_ORG: org }), org).toMatch(/^Invalid configuration: OIDC_DEFAULT_ORG: /);
    }
    // Without OIDC_ISSUER the others mean nothing: refused rather than ignored. The secret is never quoted.
    for (const name of ['OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'OIDC_ALLOWED_DOMAINS', 'OIDC_DEFAULT_ORG']) {
      const value = name === 'OIDC_DEFAULT_ORG' ? '7' : name === 'OIDC_ALLOWED_DOMAINS' ? 'example.com' : sso[name as keyof typeof sso];
      const message = refusal({ [name]: value });
      expect(message).toBe(`Invalid configuration: ${name}: only used with OIDC_ISSUER (single sign-on)`);
    }
    expect(refusal({ ...sso, OIDC_ISSUER: 'ftp://x', OIDC_CLIENT_SECRET: 'a-client-secret-of-some-length' })).not.toContain('a-client-secret-of-some-length');
  });

  it('parses a role list', () => {
    expect(loadConfig({ ROLES: 'projector, api' }).ROLES).toEqual(['projector', 'api']);
  });

  it('reads the broker list of KAFKA_BROKERS, blanks ignored; none when unset', () => {
    expect(kafkaBrokers(loadConfig({ KAFKA_BROKERS: 'kafka-1:9092, kafka-2:9092,' }))).toEqual(['kafka-1:9092', 'kafka-2:9092']);
    expect(kafkaBrokers(loadConfig({}))).toEqual([]);
  });

  it('.env.example lists every variable, once, and its values are valid', () => {
    const lines = fs.readFileSync(path.resolve(import.meta.dirname, '../../.env.example'), 'utf8').split('\n');
    const entries = lines.filter((l) => l.trim() !== '' && !l.startsWith('#')).map((l) => /^([A-Z_]+)=(.*)$/.exec(l)!);
    expect(entries.every(Boolean)).toBe(true);
    const names = entries.map((m) => m[1]!);
    expect([...names].sort()).toEqual([...CONFIG_VARIABLES].sort());
    expect(() => loadConfig(Object.fromEntries(entries.map((m) => [m[1]!, m[2]!])))).not.toThrow();
  });
});
