/**
 * The error envelope of the public contract: types, titles, field codes and the domain errors
 * handlers raise. One plugin (shared/http/errors-plugin.ts) maps them to the wire. Failures that
 * have no place on the wire say themselves what the edge needs to know of them (FailureTraits,
 * isTransient), so the plugin and the consumers ask the error instead of listing classes.
 */

export const ERROR_TITLES = {
  validation_error: 'Validation failed',
  bad_request: 'Bad request',
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  method_not_allowed: 'Method not allowed',
  conflict: 'Conflict',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported media type',
  missing_org_context: 'Missing org context',
  rate_limited: 'Rate limited',
  internal_error: 'Internal server error',
  service_unavailable: 'Service unavailable',
} as const;

export type ErrorType = keyof typeof ERROR_TITLES;

export const ERROR_STATUS: Record<ErrorType, number> = {
  validation_error: 400,
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  missing_org_context: 422,
  rate_limited: 429,
  internal_error: 500,
  service_unavailable: 503,
};

export type FieldCode =
  | 'required'
  | 'invalid_value'
  | 'unknown_field'
  | 'too_short'
  | 'too_long'
  | 'too_small'
  | 'too_large'
  | 'fk_not_found'
  | 'ambiguous_fields'
  | 'read_only';

export interface FieldError {
  field: string;
  code: FieldCode;
  message: string;
  params?: Record<string, unknown>;
}

export const MAX_ID = 2_147_483_647;

/** Any error that has a place on the wire. */
export class ApiError extends Error {
  constructor(
    readonly type: ErrorType,
    readonly detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = 'ApiError';
  }

  get status(): number {
    return ERROR_STATUS[this.type];
  }
}

/**
 * What the edge needs to know about a failure that is not an ApiError, asked of the failure itself.
 * Failure classes implement it with getters, which live on the prototype: a log line or a
 * serialization of the error shows the same fields as before.
 */
export interface FailureTraits {
  /**
   * The failure says nothing about the request, so the same request may pass later: the error
   * plugin answers `503 service_unavailable` with `Retry-After`, the Kafka consumer tries the
   * batch again instead of failing it.
   */
  readonly transient?: boolean;
  /** The message of the log line the error plugin writes for a known failure it answers with 500. */
  readonly logMessage?: string;
}

/** A dependency (the database, the event store, the projections) did not answer in time or at all, or a command lost its race too often. */
export class TransientFailure extends Error implements FailureTraits {
  get transient(): boolean {
    return true;
  }
}

const transientTests: Array<(error: unknown) => boolean> = [];

/**
 * Raw errors of a driver cannot carry `transient`: the module that knows the driver recognizes
 * them here (db/pool.ts: a lost or refused database connection), so nothing in this module has to
 * import it.
 */
export function recognizeAsTransient(test: (error: unknown) => boolean): void {
  transientTests.push(test);
}

/** Whether the same request may pass later (FailureTraits.transient, or a raw error recognized as such). */
export function isTransient(error: unknown): boolean {
  return (error as FailureTraits | null | undefined)?.transient === true || transientTests.some((test) => test(error));
}

/**
 * The configuration (the environment, a key file) cannot be used: the service does not start, and
 * the message is one line that names the variable and quotes no secret.
 */
export class ConfigError extends Error {}

/** `400 validation_error` with one entry per failing field; detail = first message (+ how many more). */
export class ValidationFailed extends ApiError {
  constructor(readonly fields: FieldError[]) {
    super('validation_error', validationDetail(fields));
    this.name = 'ValidationFailed';
  }
}

export function validationDetail(fields: FieldError[]): string {
  const first = fields[0]?.message ?? 'Validation failed';
  return fields.length > 1 ? `${first} (and ${fields.length - 1} more validation errors)` : first;
}

export class NotFoundError extends ApiError {
  constructor(detail = 'Resource not found') {
    super('not_found', detail);
  }
}

export class ConflictError extends ApiError {
  constructor(detail: string) {
    super('conflict', detail);
  }
}

export class BadRequestError extends ApiError {
  constructor(detail: string) {
    super('bad_request', detail);
  }
}

export class UnauthorizedError extends ApiError {
  constructor(detail: string) {
    super('unauthorized', detail, { 'WWW-Authenticate': 'Bearer realm="tracking-api"' });
  }
}

export class ForbiddenError extends ApiError {
  constructor(scope: string) {
    super('forbidden', `Missing required scope: ${scope}`);
  }
}

/** Builders for field errors, so every message of one kind reads the same everywhere. */
export const fieldErrors = {
  required: (field: string): FieldError => ({ field, code: 'required', message: `${field} is required` }),
  invalidValue: (field: string, message: string, params?: Record<string, unknown>): FieldError => ({
    field,
    code: 'invalid_value',
    message,
    ...(params ? { params } : {}),
  }),
  unknownField: (field: string): FieldError => ({ field, code: 'unknown_field', message: `Unknown field: ${field}` }),
  tooShort: (field: string, minLength: number): FieldError => ({
    field,
    code: 'too_short',
    message: `${field} must be at least ${minLength} character${minLength === 1 ? '' : 's'} long`,
    params: { min_length: minLength },
  }),
  tooLong: (field: string, maxLength: number): FieldError => ({
    field,
    code: 'too_long',
    message: `${field} must be at most ${maxLength} characters long`,
    params: { max_length: maxLength },
  }),
  tooSmall: (field: string, min: number): FieldError => ({
    field,
    code: 'too_small',
    message: `${field} must be at least ${min}`,
    params: { min },
  }),
  tooLarge: (field: string, max: number): FieldError => ({
    field,
    code: 'too_large',
    message: `${field} must be at most ${max}`,
    params: { max },
  }),
  fkNotFound: (field: string, message?: string): FieldError => ({
    field,
    code: 'fk_not_found',
    message: message ?? `${field} does not reference an existing record`,
  }),
  ambiguous: (fields: string[]): FieldError[] =>
    fields.map((field) => ({
      field,
      code: 'ambiguous_fields' as const,
      message: `Supply only one of ${fields.join(' or ')}`,
    })),
  readOnly: (field: string, message: string): FieldError => ({ field, code: 'read_only', message }),
  // The text rules of every body and query value (docs/api.md "What text the service accepts").
  malformedText: (field: string): FieldError => ({
    field,
    code: 'invalid_value',
    message: `${field} must be valid Unicode text (no lone surrogates)`,
  }),
  nulCharacter: (field: string): FieldError => ({
    field,
    code: 'invalid_value',
    message: `${field} must not contain the NUL character (\\u0000)`,
  }),
  inexactNumber: (field: string, number: string): FieldError => ({
    field,
    code: 'invalid_value',
    message: `${field} holds the number ${number.length > 40 ? `${number.slice(0, 40)}…` : number}, which cannot be stored exactly (out of the range or precision of a 64-bit float, or -0); send it as a string`,
  }),
  tooDeep: (field: string, maxNesting: number): FieldError => ({
    field,
    code: 'invalid_value',
    message: `${field} must not nest objects and arrays more than ${maxNesting} levels deep`,
    params: { max_depth: maxNesting },
  }),
};

/** Orders field errors by a declared field order (stable for fields not in it). */
export function orderFieldErrors(errors: FieldError[], order: readonly string[]): FieldError[] {
  const rank = (field: string) => {
    const top = field.split(/[.[]/)[0]!;
    const i = order.indexOf(top);
    return i >= 0 ? i : order.length;
  };
  return errors.map((e, i) => ({ e, i })).sort((a, b) => rank(a.e.field) - rank(b.e.field) || a.i - b.i).map((x) => x.e);
}
