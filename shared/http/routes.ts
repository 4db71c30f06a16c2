import type { FastifyInstance, FastifyRequest } from 'fastify';
import type pg from 'pg';
import type { z } from 'zod';
import type { FieldError } from '../errors.js';
import type { Principal } from '../auth/principal.js';
import { bearerAccess, type BearerDependencies, type BearerRequirement } from './access.js';
import { registerPipeline, type HttpMethod, type PipelineResult, type RawBodyRule } from './pipeline.js';
import { isFieldError, parsePathParam, type ParsedQuery, type QuerySpec } from './validation.js';
import { EXPORT_UNREAD_QUERY, answerExport, exportFormatOf, listItemColumns, type ExportSource } from './export.js';
import type { ExportColumn, JsonSchema } from '../export/columns.js';

/**
 * The public contract's routes (`/api/v1`, `/ingest/v1`): the one request pipeline
 * (shared/http/pipeline.ts) with bearer tokens for access, path ids decoded to numbers, and the
 * contract's media types. A route declares, beside its handler, what the OpenAPI document says
 * of it (shared/http/openapi.ts).
 */

export type { HttpMethod } from './pipeline.js';

const BODY_MEDIA_TYPES = {
  POST: { mediaType: 'application/json', detail: 'Content-Type must be application/json' },
  PATCH: { mediaType: 'application/merge-patch+json', detail: 'Content-Type must be application/merge-patch+json on PATCH operations' },
} as const;

export interface RouteResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RouteRequest<Q extends QuerySpec, B> {
  request: FastifyRequest;
  principal: Principal;
  /** Path ids, already checked to be 1..2147483647 (a text parameter of TEXT_PATH_PARAMS, such as `alert_id`, is a string: read it with `textParam`). */
  params: Record<string, number>;
  query: ParsedQuery<Q>;
  body: B;
  /** The body's JSON as sent, before the schema (an empty object for a route without a body). */
  sentBody: Readonly<Record<string, unknown>>;
}

export interface ResponseDoc {
  description: string;
  /** JSON Schema of the body (from zod via z.toJSONSchema, or written out). */
  schema?: Record<string, unknown>;
}

export interface RouteDefinition<Q extends QuerySpec = QuerySpec, S extends z.ZodType = z.ZodType> extends BearerRequirement {
  method: HttpMethod;
  /** OpenAPI form, relative to the listener's prefix (`/api/v1`): `/assets/{asset_id}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  query?: Q;
  body?: S;
  /** Field order for stable error ordering (default: the schema's keys). */
  bodyFieldOrder?: readonly string[];
  /** A file instead of a JSON body (the handler's `body` is its Buffer): its media types and size limit. */
  rawBody?: RawBodyRule;
  responses: Record<number, ResponseDoc>;
  /**
   * Optional: field errors that depend on stored state (e.g. a PATCH's read-only fields that
   * differ), computed from the raw body when the schema itself has failed, so the response lists
   * every field error at once. When the schema passes, the handler reports them itself.
   */
  stateBodyErrors?(input: { principal: Principal; params: Record<string, number>; body: Record<string, unknown> }): Promise<FieldError[]>;
  handler(input: RouteRequest<Q, z.output<S>>): Promise<RouteResult>;
  /**
   * A list's export (docs/api.md "Export"): declared, the list also answers `Accept: text/csv` and
   * XLSX with the whole list, in the columns of the item its 200 declares. One declaration per list.
   */
  export?: RouteExport<Q>;
}

/** A list route's export: its whole list as one statement, without paging. */
export interface RouteExport<Q extends QuerySpec = QuerySpec> {
  /** Where the export's read-only transaction runs. */
  pool: pg.Pool;
  /**
   * The list's statement (its own filters and sort, no LIMIT/OFFSET), built in the export's
   * transaction on `db`: a 404 or a refused filter thrown here answers as the list's own, in JSON.
   */
  source(input: Omit<RouteRequest<Q, undefined>, 'body' | 'sentBody'>, db: pg.PoolClient): Promise<ExportSource>;
}

/** Keeps the declared generic types of one route while collecting heterogeneous routes in one list. */
export function defineRoute<Q extends QuerySpec, S extends z.ZodType>(route: RouteDefinition<Q, S>): RouteDefinition {
  return route as unknown as RouteDefinition;
}

export interface RouteDependencies extends BearerDependencies {
  /** Where the routes live, e.g. `/api/v1`. */
  prefix: string;
}

/** Registers the routes on `app` (as a plugin: they exist once `app` is ready). */
export function registerRoutes(app: FastifyInstance, routes: readonly RouteDefinition[], deps: RouteDependencies): void {
  // An export's columns, from the item schema its 200 declares: worked out (and checked) once.
  const exportColumns = new Map<RouteDefinition, ExportColumn[]>();
  for (const route of routes) {
    if (route.export) exportColumns.set(route, listItemColumns(route.responses[200]?.schema as JsonSchema | undefined, `${route.method} ${route.path}`));
  }
  const exportFormat = (route: RouteDefinition, request: FastifyRequest) => (route.export ? exportFormatOf(request.headers.accept) : null);
  registerPipeline<RouteDefinition, Principal, Record<string, number>>(app, {
    prefix: deps.prefix,
    routes,
    access: bearerAccess(deps),
    bodyMediaTypes: BODY_MEDIA_TYPES,
    // Path ids are 1..2147483647 (docs/api.md, "Requests and responses"); an alert's id is text (TEXT_PATH_PARAMS).
    decodeParam: (name, raw) => parsePathParam(name, raw),
    isParamError: isFieldError,
    answerOptions: true,
    refuseUndeclaredQuery: true,
    unreadQuery: (route, request) => (exportFormat(route, request) ? EXPORT_UNREAD_QUERY : []),
    stateBodyErrors: (route, { caller, params, body }) => route.stateBodyErrors?.({ principal: caller, params, body }) ?? Promise.resolve([]),
    call: async (route, { request, reply, caller, params, query, body, sentBody }): Promise<PipelineResult> => {
      const format = exportFormat(route, request);
      if (format && route.export) {
        const declared = route.export;
        await answerExport({
          request,
          reply,
          format,
          path: route.path,
          columns: exportColumns.get(route)!,
          pool: declared.pool,
          source: (db) => declared.source({ request, principal: caller, params, query: query as ParsedQuery<QuerySpec> }, db),
        });
        return { streamed: true };
      }
      return route.handler({ request, principal: caller, params, query: query as ParsedQuery<QuerySpec>, body, sentBody });
    },
  });
}

/** A text path parameter (TEXT_PATH_PARAMS) as sent: the params' type says number, for the ids every other route has. */
export function textParam(params: Record<string, number>, name: string): string {
  return String((params as Record<string, unknown>)[name]);
}
