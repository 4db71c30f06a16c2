import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../shared/config.js';

// INTERFACES.md "Configuration": defaults, and one clear line naming a bad variable.
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
      ROLES: ['api', 'ingest', 'projector'],
      ENVIRONMENT: 'development',
      LOG_LEVEL: 'info',
    });
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['OPS_PORT', '-1'],
    ['EVENT_STORE', 'mongo'],
    ['ROLES', 'api,web'],
    ['LOG_LEVEL', 'loud'],
    ['DATABASE_URL', 'mysql://x'],
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

  it('requires KURRENTDB_URL with EVENT_STORE=kurrentdb', () => {
    expect(() => loadConfig({ EVENT_STORE: 'kurrentdb' })).toThrow(/KURRENTDB_URL/);
  });

  it('parses a role list', () => {
    expect(loadConfig({ ROLES: 'projector, api' }).ROLES).toEqual(['projector', 'api']);
  });
});
