import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { createLogger } from '../../shared/logger.js';
import { redactSecrets, redactUrl, registerSecret } from '../../shared/redaction.js';

// Secrets never reach a log line or a printed error (docs/operations.md, "Secrets: the signing keys and their encryption").

const TOKEN =
  'eyJhbGciOiJFZERTQSIsImtpZCI6InNrXzAxIiwidHlwIjoiSldUIn0.eyJzdWIiOiJha18wMSIsIm9yZ19pZCI6MX0.Kf9dPa1ruFsHj1V56u0OXE3f65azW0PFJzrr08lQnDvuuIyhgpERZzCh8MejXcEaZ8dPC0qfB9sH0_KQ3CSQAg';

describe('redactSecrets', () => {
  it('masks the password of a connection URL, keeping the user and the host', () => {
    const text = 'connect postgres://tracking_runtime:s3cr3t-Pa55word@db.internal:5432/tracking failed';
    expect(redactSecrets(text)).toBe('connect postgres://tracking_runtime:[redacted]@db.internal:5432/tracking failed');
    expect(redactUrl('postgresql://u:p%40ss@h/db')).toBe('postgresql://u:[redacted]@h/db');
  });

  it('masks JWTs wherever they appear, and bearer credentials of any shape', () => {
    expect(redactSecrets(`GET /api/v1/assets/${TOKEN}?x=1`)).toBe('GET /api/v1/assets/[redacted]?x=1');
    expect(redactSecrets(`{"authorization":"Bearer ${TOKEN}"}`)).not.toContain(TOKEN.split('.')[2]);
    expect(redactSecrets('Authorization: Bearer opaque-credential-123')).toBe('Authorization: Bearer [redacted]');
  });

  it('masks registered secrets, and leaves ordinary text alone', () => {
    registerSecret('kek-material-0123456789abcdef');
    registerSecret('short');
    expect(redactSecrets('key=kek-material-0123456789abcdef;')).toBe('key=[redacted];');
    expect(redactSecrets('a short tracking line')).toBe('a short tracking line');
  });
});

describe('the logger', () => {
  it('censors credentials by field and by content', () => {
    let output = '';
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        output += chunk.toString();
        done();
      },
    });
    const log = createLogger('debug', 'test', sink);
    log.info({ req: { headers: { authorization: 'Bearer x-opaque' } }, password: 'hunter2hunter2' }, 'request');
    log.error({ err: new Error('could not reach postgres://svc:pw-in-an-error@h/db') }, 'failed');
    log.debug({ url: `/api/v1/assets/${TOKEN}` }, 'path');
    expect(output).not.toContain('x-opaque');
    expect(output).not.toContain('hunter2hunter2');
    expect(output).not.toContain('pw-in-an-error');
    expect(output).not.toContain(TOKEN.split('.')[2]);
    expect(output.trim().split('\n')).toHaveLength(3);
  });
});

describe('configuration errors on secret variables', () => {
  it.each([
    ['SIGNING_KEY_ENCRYPTION_KEY', 'not-a-key-but-still-a-secret-value'],
    ['NEW_SIGNING_KEY_ENCRYPTION_KEY', 'not-a-key-but-still-a-secret-value'],
    ['DATABASE_URL', 'mysql://admin:not-shown-password@db/x'],
  ])('name %s in one line without quoting its secret', (name, value) => {
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
    expect(message).not.toContain('not-a-key-but-still-a-secret-value');
    expect(message).not.toContain('not-shown-password');
  });

  it('MIGRATION_DATABASE_URL and ANALYST_DATABASE_URL go with DATABASE_URL', () => {
    expect(() => loadConfig({ MIGRATION_DATABASE_URL: 'postgres://m:p@h/db' })).toThrow(/MIGRATION_DATABASE_URL: only used with DATABASE_URL/);
    expect(() => loadConfig({ ANALYST_DATABASE_URL: 'postgres://a:p@h/db' })).toThrow(/ANALYST_DATABASE_URL/);
    expect(loadConfig({ DATABASE_URL: 'postgres://r:p@h/db', MIGRATION_DATABASE_URL: 'postgres://m:p@h/db' }).MIGRATION_DATABASE_URL).toBe('postgres://m:p@h/db');
  });
});
