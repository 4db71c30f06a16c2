import { describe, expect, it } from 'vitest';
import { hasScope, type Principal } from '../../shared/auth/principal.js';

const apiKey: Principal = { kind: 'api_key', orgId: 1, scopes: ['assets:read'], keyId: 'key-1', subject: 'key-1' };
const session: Principal = { kind: 'session', orgId: null, scopes: [], keyId: null, subject: 'ops@example.com' };

describe('hasScope', () => {
  it('an API key needs the scope itself', () => {
    expect(hasScope(apiKey, 'assets:read')).toBe(true);
    expect(hasScope(apiKey, 'assets:write')).toBe(false);
  });

  it('a session passes every scope check', () => {
    expect(hasScope(session, 'assets:write')).toBe(true);
    expect(hasScope(session, 'keys:admin')).toBe(true);
  });
});
