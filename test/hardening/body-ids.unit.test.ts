import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { ValidationFailed } from '../../shared/errors.js';
import { validateBody } from '../../shared/http/validation.js';
import { bodyId } from '../../shared/domain/fields.js';

// docs/api.md "Ids": a body id above 2147483647 is `too_large` with params.max 2147483647, however
// large it is (past 2^53 zod's own safe-integer bound must not be the one reported).
describe('body ids', () => {
  it('are too_large with the contract max at any size above it', () => {
    const schema = z.strictObject({ parent_id: bodyId });
    for (const id of [2_147_483_648, 2 ** 53, 2 ** 53 + 2, 1e20, 1.2e29]) {
      let thrown: unknown;
      try {
        validateBody(schema, { parent_id: id });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ValidationFailed);
      expect((thrown as ValidationFailed).fields, String(id)).toEqual([
        { field: 'parent_id', code: 'too_large', message: 'parent_id must be at most 2147483647', params: { max: 2147483647 } },
      ]);
    }
  });
});
