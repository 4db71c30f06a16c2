import { ApiError, ValidationFailed } from '../errors.js';
import { AuthCommandError } from '../domain/orgs-and-keys/decider.js';
import { PeopleCommandError } from '../domain/people/decider.js';

/** A domain refusal as the contract's envelope: one field error where it names a body field; any other error unchanged. */
export function apiErrorOf(error: unknown): unknown {
  if (error instanceof PeopleCommandError) {
    if (error.kind === 'bad_request' && error.field) return new ValidationFailed([{ field: error.field, code: 'invalid_value', message: error.message }]);
    return new ApiError(error.kind, error.message);
  }
  if (error instanceof AuthCommandError) {
    return / does not exist$/.test(error.message) ? new ApiError('not_found', error.message) : new ApiError('bad_request', error.message);
  }
  return error;
}
