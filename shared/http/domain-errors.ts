import { ApiError, ValidationFailed } from '../errors.js';
import { DomainRefusal } from '../domain/refusal.js';

/**
 * A domain refusal as the contract's error envelope (docs/api.md, "Errors"), for both HTTP
 * pipelines: field errors as `validation_error` with their entries; a bad request about one body
 * field as that field's `invalid_value`; every other kind as the error type of its name, with the
 * refusal's message as the detail. Anything else is returned unchanged, for the error plugin.
 */
export function apiErrorOf(error: unknown): unknown {
  if (!(error instanceof DomainRefusal)) return error;
  switch (error.kind) {
    case 'invalid':
      return new ValidationFailed([...error.fields]);
    case 'bad_request':
      if (error.field !== undefined) return new ValidationFailed([{ field: error.field, code: 'invalid_value', message: error.message }]);
      return new ApiError('bad_request', error.message);
    case 'forbidden':
    case 'not_found':
    case 'conflict':
      return new ApiError(error.kind, error.message);
  }
}
