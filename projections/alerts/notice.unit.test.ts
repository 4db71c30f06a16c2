import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { alertsChangedPayload, parseAlertsChanged } from './notice.js';

describe('the notice that alerts changed', () => {
  it('names each organization once, in order, and reads back as sent (with its schema)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 2_000_000_000 }), { minLength: 1, maxLength: 600 }), fc.constantFrom('read_model', 'rebuild_alerts_1'), (orgs, schema) => {
        const payload = alertsChangedPayload(orgs);
        const parsed = parseAlertsChanged(`${schema} ${payload}`);
        const distinct = [...new Set(orgs)].sort((a, b) => a - b);
        expect(parsed?.schema).toBe(schema);
        if (distinct.length > 500) expect(parsed?.orgIds).toBeNull();
        else expect(parsed?.orgIds).toEqual(distinct);
        // NOTIFY's payload is at most 8000 bytes.
        expect(`${schema} ${payload}`.length).toBeLessThan(8000);
      }),
    );
  });

  it('a payload that is not one is null', () => {
    for (const bad of ['', 'read_model', 'read_model ', 'read_model 1,', 'read_model x', ' 1']) expect(parseAlertsChanged(bad), bad).toBeNull();
  });
});
