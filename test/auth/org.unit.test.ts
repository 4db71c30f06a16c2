import { describe, expect, it } from 'vitest';
import { orgOf } from '../../shared/auth/org.js';
import { ApiError } from '../../shared/errors.js';
import type { Principal } from '../../shared/auth/principal.js';

// The organization a master-data request is scoped to, and the refusal of a principal without one.

const session = (orgId: number | null): Principal => ({ kind: 'session', orgId, scopes: ['keys:admin'], keyId: null, subject: 'ada@example.com' });

function refusal(work: () => unknown): { type: string; status: number; detail: string } {
  try {
    work();
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    const { type, status, detail } = error as ApiError;
    return { type, status, detail };
  }
  throw new Error('not refused');
}

describe('orgOf', () => {
  it("is the principal's org", () => {
    expect(orgOf(session(7))).toBe(7);
    expect(orgOf({ kind: 'api_key', orgId: 3, scopes: [], keyId: 'ak_1', subject: 'ak_1' }, 'forbidden')).toBe(3);
  });

  it('without one: 422 missing_org_context by default (as on GET /orgs/me), 403 forbidden where locations ask for it', () => {
    expect(refusal(() => orgOf(session(null)))).toEqual({ type: 'missing_org_context', status: 422, detail: 'The principal has no organization context' });
    expect(refusal(() => orgOf(session(null), 'missing_org_context'))).toEqual({ type: 'missing_org_context', status: 422, detail: 'The principal has no organization context' });
    expect(refusal(() => orgOf(session(null), 'forbidden'))).toEqual({ type: 'forbidden', status: 403, detail: 'This principal has no organization' });
  });
});
