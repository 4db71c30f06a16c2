import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ERROR_STATUS, ERROR_TITLES, ValidationFailed, isTransient, type ErrorType, type FailureTraits } from '../errors.js';

export function sendError(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  const status = ERROR_STATUS[error.type];
  for (const [name, value] of Object.entries(error.headers)) reply.header(name, value);
  const body: Record<string, unknown> = {
    type: error.type,
    title: ERROR_TITLES[error.type],
    status,
    detail: error.detail,
    instance: request.url.split('?')[0],
    request_id: request.id,
  };
  if (error instanceof ValidationFailed) body.fields = error.fields;
  return reply.code(status).type('application/json').send({ error: body });
}

function fromFastifyError(error: FastifyError): ApiError | null {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', 'Request body must not exceed 1 MiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('bad_request', error.message);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('bad_request', 'Request body is not valid JSON');
    default:
      if (error.statusCode === 413) return new ApiError('payload_too_large', 'Request body must not exceed 1 MiB');
      if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
        return new ApiError('bad_request' as ErrorType, error.message);
      }
      return null;
  }
}

/** One place where every error becomes the contract's envelope; `prefix` is where the listener's routes live. */
/**
 * A listener's own answer to a path no route declares, or null to give the contract's 404
 * envelope (the console's Not found page, docs/console.md).
 */
export type NotFoundPage = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply> | null;

export function registerErrorHandling(app: FastifyInstance, prefix?: string, notFoundPage?: () => NotFoundPage | undefined): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof ApiError) return sendError(request, reply, error);
    // The failure says whether the same request may pass later (a dependency unreachable or late,
    // a command that lost its race too often): errors.ts, isTransient.
    if (isTransient(error)) {
      request.log.error({ err: error }, 'dependency unavailable');
      return sendError(request, reply, new ApiError('service_unavailable', 'The service is temporarily unavailable; retry later', { 'Retry-After': '1' }));
    }
    // A known failure that retrying will not cure (a command's event set aside by a projection:
    // the append is durable, the read model is not) names its own log line.
    const { logMessage } = error as FailureTraits;
    if (logMessage !== undefined) {
      request.log.error({ err: error }, logMessage);
      return sendError(request, reply, new ApiError('internal_error', 'An unexpected error occurred'));
    }
    const mapped = fromFastifyError(error);
    if (mapped) return sendError(request, reply, mapped);
    request.log.error({ err: error }, 'unhandled error');
    return sendError(request, reply, new ApiError('internal_error', 'An unexpected error occurred'));
  });

  app.setNotFoundHandler((request, reply) => {
    const page = notFoundPage?.()?.(request, reply);
    if (page) return page;
    const path = request.url.split('?')[0]!;
    const detail = prefix !== undefined && (path.startsWith(`${prefix}/`) || path === prefix) ? `Unknown API route: ${path}` : `Not found: ${path}`;
    return sendError(request, reply, new ApiError('not_found', detail));
  });
}
