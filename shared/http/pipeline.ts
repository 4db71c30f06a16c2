import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ApiError, ValidationFailed, orderFieldErrors, type FieldError } from '../errors.js';
import { JsonText } from '../json/text.js';
import { runInCommandContext } from '../event-store/command-context.js';
import { readRequestBody } from './body.js';
import { apiErrorOf } from './domain-errors.js';
import { decodeJsonObject, parseQuery, validateBody, type ParsedQuery, type QuerySpec } from './validation.js';
import type { AccessStrategy } from './access.js';

/**
 * The one request pipeline (docs/design.md, "One request pipeline"). Every JSON endpoint of the
 * service, the public contract's (`/api/v1`, `/ingest/v1`) and the web application's own
 * (`/app/api`), is a route of a pipeline, registered as an encapsulated Fastify plugin, and
 * every request is checked in CHECK_ORDER: the first step that fails answers, and no later step
 * runs (so a request without credentials never has its body read). What differs between
 * listeners is data: the access strategy (shared/http/access.ts), the media type each method's
 * body must have, how path parameters decode, and whether OPTIONS is answered.
 */
export const CHECK_ORDER = ['route', 'method', 'access', 'content type', 'path parameters', 'query', 'body'] as const;

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** What a handler answers: a status with a body and headers, or that it answered on the reply itself (a stream). */
export type PipelineResult = { status: number; body?: unknown; headers?: Record<string, string | string[]> } | { streamed: true };

export interface PipelineInput<Caller, Params, Q extends QuerySpec, B> {
  request: FastifyRequest;
  reply: FastifyReply;
  /** Who calls, as the access strategy admitted them. */
  caller: Caller;
  params: Params;
  query: ParsedQuery<Q>;
  /** The body as the route's schema decoded it. */
  body: B;
  /** The body's JSON as sent, before the schema (an empty object for a route without a body). */
  sentBody: Readonly<Record<string, unknown>>;
}

/** A route as every pipeline knows it; a listener's route type adds what its access and documents need. */
export interface PipelineRoute {
  method: HttpMethod;
  /** Under the prefix, with `{name}` (or Fastify's `:name`) for path parameters. */
  path: string;
  query?: QuerySpec;
  body?: z.ZodType;
  /** Field order for stable error ordering (default: the schema's keys). */
  bodyFieldOrder?: readonly string[];
  /**
   * Instead of a JSON `body`: the body as bytes, of one of these media types, at most `maxBytes`
   * (docs/api.md, "Import": the one route whose body is a file); the handler gets it as `body`.
   */
  rawBody?: RawBodyRule;
}

export interface RawBodyRule {
  mediaTypes: readonly string[];
  /** The 415 answer's detail. */
  detail: string;
  maxBytes: number;
}

export interface MediaTypeRule {
  mediaType: string;
  /** The 415 answer's detail. */
  detail: string;
}

export interface PipelineOptions<R extends PipelineRoute, Caller, Params> {
  /** Where the routes live: `/api/v1`, `/ingest/v1`, `/app/api`. */
  prefix: string;
  routes: readonly R[];
  access: AccessStrategy<R, Caller>;
  /** The media type a body must have, per method that takes one. */
  bodyMediaTypes: Partial<Record<HttpMethod, MediaTypeRule>>;
  /** A path parameter's value, or the field error that refuses it (all are reported at once). */
  decodeParam(name: string, raw: string): unknown;
  isParamError(value: unknown): value is FieldError;
  /** Answer OPTIONS with 204 and Allow (the public contract), instead of 405. */
  answerOptions: boolean;
  /** Refuse query parameters a route does not declare (the public contract), instead of leaving them to the handler. */
  refuseUndeclaredQuery: boolean;
  /** Query parameters this request does not read, left out before the query step (an export's `limit` and `offset`). */
  unreadQuery?(route: R, request: FastifyRequest): readonly string[];
  /** Headers every answer of this pipeline carries, set before any step (an error's too). */
  headers?: Record<string, string>;
  /**
   * Field errors that depend on stored state (a PATCH's read-only fields that differ), added to
   * the schema's when it has failed, so the answer lists every field error at once.
   */
  stateBodyErrors?(route: R, input: { caller: Caller; params: Params; body: Record<string, unknown> }): Promise<FieldError[]>;
  /** Calls the route's handler (each listener's routes take their own input shape). */
  call(route: R, input: PipelineInput<Caller, Params, QuerySpec, unknown>): Promise<PipelineResult>;
}

const STATE_CHANGING = new Set(['POST', 'PATCH', 'DELETE', 'PUT']);

/** `Allow`: the declared methods in a fixed order, HEAD wherever GET is. */
export function allowHeader(methods: Iterable<string>): string {
  const declared = new Set(methods);
  return ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'].filter((m) => (m === 'HEAD' ? declared.has('GET') : declared.has(m))).join(', ');
}

function mediaType(header: string | undefined): string | null {
  if (!header) return null;
  return header.split(';')[0]!.trim().toLowerCase() || null;
}

const paramNames = (path: string): string[] => [...path.matchAll(/[{:]([a-z_]+)\}?/g)].map((m) => m[1]!);

/** Schema errors plus state errors, ordered by the body's field order (stable), one entry per field. */
function mergeFieldErrors(schema: FieldError[], state: FieldError[], order: readonly string[]): FieldError[] {
  const seen = new Set(schema.map((e) => e.field));
  return orderFieldErrors([...schema, ...state.filter((e) => !seen.has(e.field))], order);
}

/**
 * The pipeline as an encapsulated Fastify plugin. Each path is one Fastify route accepting every
 * method the server knows, so that the method check (405 with `Allow`) comes after route matching
 * and before access. A path declared twice with one method is a programming error, refused here.
 */
export function pipelinePlugin<R extends PipelineRoute, Caller, Params>(options: PipelineOptions<R, Caller, Params>): FastifyPluginAsync {
  const byPath = new Map<string, Map<string, R>>();
  for (const route of options.routes) {
    const methods = byPath.get(route.path) ?? new Map<string, R>();
    if (methods.has(route.method)) throw new Error(`route declared twice: ${route.method} ${route.path}`);
    methods.set(route.method, route);
    byPath.set(route.path, methods);
  }
  return async (scope: FastifyInstance) => {
    for (const [path, methods] of byPath) {
      const allow = allowHeader(methods.keys());
      // Every method of a path shares its path parameters: worked out once, not per request.
      const names = paramNames(path);
      scope.route({
        method: scope.supportedMethods,
        url: options.prefix + path.replace(/\{([a-z_]+)\}/g, ':$1'),
        // A domain refusal from any step (a handler, or the state a body's field errors need)
        // becomes the contract's envelope here, once.
        handler: (request, reply) =>
          answer(options, methods, allow, names, request, reply).catch((error: unknown) => {
            throw apiErrorOf(error);
          }),
      });
    }
  };
}

/** Registers the pipeline on `app` (its routes exist once `app` is ready). */
export function registerPipeline<R extends PipelineRoute, Caller, Params>(app: FastifyInstance, options: PipelineOptions<R, Caller, Params>): void {
  void app.register(pipelinePlugin(options));
}

async function answer<R extends PipelineRoute, Caller, Params>(
  options: PipelineOptions<R, Caller, Params>,
  methods: Map<string, R>,
  allow: string,
  names: readonly string[],
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  for (const [name, value] of Object.entries(options.headers ?? {})) reply.header(name, value);
  // method
  if (request.method === 'OPTIONS' && options.answerOptions) {
    // Reserved for CORS preflight, which this server-to-server API never grants.
    return reply.code(204).header('Allow', allow).send();
  }
  const route = methods.get(request.method === 'HEAD' ? 'GET' : request.method);
  if (!route) throw new ApiError('method_not_allowed', `Allowed methods: ${allow}`, { Allow: allow });
  const changesState = STATE_CHANGING.has(request.method);

  // access
  const caller = await options.access.admit(request, reply, route, changesState);

  // content type
  const rule = route.body ? options.bodyMediaTypes[route.method] : undefined;
  if (rule && mediaType(request.headers['content-type']) !== rule.mediaType) throw new ApiError('unsupported_media_type', rule.detail);
  if (route.rawBody && !route.rawBody.mediaTypes.includes(mediaType(request.headers['content-type']) ?? '')) throw new ApiError('unsupported_media_type', route.rawBody.detail);

  // path parameters
  const rawParams = request.params as Record<string, string>;
  const params: Record<string, unknown> = {};
  const paramErrors: FieldError[] = [];
  for (const name of names) {
    const decoded = options.decodeParam(name, rawParams[name] ?? '');
    if (options.isParamError(decoded)) paramErrors.push(decoded);
    else params[name] = decoded;
  }
  if (paramErrors.length > 0) throw new ValidationFailed(paramErrors);

  // query
  const spec = route.query ?? (options.refuseUndeclaredQuery ? {} : undefined);
  const rawQuery = { ...((request.query ?? {}) as Record<string, string | string[]>) };
  for (const name of options.unreadQuery?.(route, request) ?? []) delete rawQuery[name];
  const query = spec ? parseQuery(rawQuery, spec) : ({} as ParsedQuery<QuerySpec>);

  // body
  let body: unknown = undefined;
  let sentBody: Record<string, unknown> = {};
  if (route.body) {
    // Read only now, after every check that comes before the body.
    request.body = await readRequestBody(request.raw);
    const decoded = decodeJsonObject(request.body as Buffer, route.method);
    sentBody = decoded.value;
    const order = route.bodyFieldOrder ?? Object.keys((route.body as unknown as { shape?: object }).shape ?? {});
    try {
      body = validateBody(route.body, decoded.value, order, decoded.textErrors);
    } catch (error) {
      if (error instanceof ValidationFailed && options.stateBodyErrors) {
        const extra = await options.stateBodyErrors(route, { caller, params: params as Params, body: decoded.value });
        if (extra.length > 0) throw new ValidationFailed(mergeFieldErrors(error.fields, extra, order));
      }
      throw error;
    }
  } else if (route.rawBody) {
    // A file: bytes as sent, never more than the route's limit held in memory.
    body = await readRequestBody(request.raw, route.rawBody.maxBytes);
  } else if (changesState) {
    // No route reads it, but the size limit holds for every body, at the same step.
    await readRequestBody(request.raw);
  }

  // Every event the handler's commands append records who asked and this request's id.
  const context = { actor: options.access.actorOf(caller), requestId: request.id };
  const result = await runInCommandContext(context, () => options.call(route, { request, reply, caller, params: params as Params, query, body, sentBody }));
  if ('streamed' in result) return reply;
  reply.code(result.status);
  for (const [name, value] of Object.entries(result.headers ?? {})) reply.header(name, value);
  if (result.body === undefined) return reply.send();
  if (result.body instanceof JsonText) return reply.type('application/json; charset=utf-8').send(result.body.text);
  return reply.send(result.body);
}
