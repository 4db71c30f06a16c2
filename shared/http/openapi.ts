import type { FastifyInstance } from 'fastify';
import YAML from 'yaml';
import { z } from 'zod';
import { ERROR_TITLES, MAX_ID, type FieldCode } from '../errors.js';
import type { RouteDefinition } from './routes.js';

/**
 * The machine-readable contract (INTERFACES.md): an OpenAPI 3.1 document generated from the
 * same route definitions and zod schemas that validate requests. Built once at start.
 */

type Json = Record<string, unknown>;

const FIELD_CODES: FieldCode[] = [
  'required',
  'invalid_value',
  'unknown_field',
  'too_short',
  'too_long',
  'too_small',
  'too_large',
  'fk_not_found',
  'ambiguous_fields',
  'read_only',
];

const errorSchema: Json = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['type', 'title', 'status', 'detail', 'instance', 'request_id'],
      properties: {
        type: { type: 'string', enum: Object.keys(ERROR_TITLES), 'x-extensible-enum': true, description: 'Branch on this; new types may appear.' },
        title: { type: 'string', description: 'Fixed per type.' },
        status: { type: 'integer', description: 'Equals the HTTP status.' },
        detail: { type: 'string' },
        instance: { type: 'string', description: 'Request path.' },
        request_id: { type: 'string', description: 'ULID; equals the X-Request-ID response header.' },
        fields: {
          type: 'array',
          description: 'Present only for validation_error.',
          items: {
            type: 'object',
            required: ['field', 'code', 'message'],
            properties: {
              field: { type: 'string' },
              code: { type: 'string', enum: FIELD_CODES, 'x-extensible-enum': true },
              message: { type: 'string' },
              params: { type: 'object', additionalProperties: true },
            },
          },
        },
      },
    },
  },
};

const ERROR_REF = { $ref: '#/components/schemas/Error' };

const COMMON_ERRORS: Record<number, string> = {
  401: 'Missing, malformed, revoked or expired key (WWW-Authenticate: Bearer realm="tracking-api")',
  405: 'Method not allowed; the Allow header lists the methods',
  429: 'Rate limited; wait Retry-After seconds',
  500: 'Unhandled failure',
};

function stripSchemaKeyword(schema: Json): Json {
  const { $schema: _ignored, ...rest } = schema;
  return rest;
}

function bodySchema(schema: z.ZodType): Json {
  return stripSchemaKeyword(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json);
}

function operation(route: RouteDefinition): Json {
  const parameters: Json[] = [];
  for (const match of route.path.matchAll(/\{([a-z_]+)\}/g)) {
    parameters.push({
      name: match[1],
      in: 'path',
      required: true,
      schema: { type: 'integer', format: 'int64', minimum: 1, maximum: MAX_ID },
    });
  }
  for (const [name, param] of Object.entries(route.query ?? {})) {
    parameters.push({
      name,
      in: 'query',
      required: false,
      ...(param.description ? { description: param.description } : {}),
      ...(param.repeatable ? { style: 'form', explode: true, schema: { type: 'array', items: param.jsonSchema } } : { schema: param.jsonSchema }),
    });
  }

  const responses: Json = {};
  for (const [status, doc] of Object.entries(route.responses)) {
    const code = Number(status);
    const schema = doc.schema ?? (code >= 400 ? ERROR_REF : undefined);
    responses[status] = { description: doc.description, ...(schema ? { content: { 'application/json': { schema } } } : {}) };
  }
  const common: Record<number, string> = { ...COMMON_ERRORS };
  if (route.scope) common[403] = `Missing required scope: ${route.scope}`;
  if (route.body) {
    common[400] = 'validation_error or bad_request';
    common[415] = route.method === 'PATCH' ? 'Content-Type must be application/merge-patch+json' : 'Content-Type must be application/json';
    common[413] = 'Body over 1 MiB (payload_too_large)';
  }
  if (route.path.includes('{') || route.query) common[400] ??= 'validation_error';
  for (const [status, description] of Object.entries(common)) {
    responses[status] ??= { description, content: { 'application/json': { schema: ERROR_REF } } };
  }

  const op: Json = {
    operationId: route.operationId,
    summary: route.summary,
    tags: [route.tag],
    'x-required-scopes': route.scope ? [route.scope] : [],
    ...(parameters.length > 0 ? { parameters } : {}),
    responses,
  };
  if (route.body) {
    const mediaType = route.method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    op.requestBody = { required: true, content: { [mediaType]: { schema: bodySchema(route.body) } } };
  }
  return op;
}

/** What tells one listener's document from another's. */
export interface OpenApiListener {
  title: string;
  description: string;
  /** The listener's prefix, e.g. `/api/v1`. */
  serverUrl: string;
}

export const PUBLIC_API: OpenApiListener = {
  title: 'Asset and Location Tracking API',
  description: 'Multi-tenant master data (assets, locations, tags) and tracking views. Every operation lists the scopes it needs in x-required-scopes.',
  serverUrl: '/api/v1',
};

export function buildOpenApiDocument(routes: readonly RouteDefinition[], listener: OpenApiListener = PUBLIC_API): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const item = (paths[route.path] ??= {});
    item[route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: { title: listener.title, version: '1.0.0', description: listener.description },
    servers: [{ url: listener.serverUrl }],
    security: [{ bearerAuth: [] }],
    tags: [...new Set(routes.map((r) => r.tag))].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: { Error: errorSchema },
    },
  };
}

/** GET /openapi/v1.json and /openapi/v1.yaml on a listener, without a key. */
export function registerOpenApi(app: FastifyInstance, routes: readonly RouteDefinition[], listener: OpenApiListener = PUBLIC_API): void {
  const document = buildOpenApiDocument(routes, listener);
  const json = JSON.stringify(document, null, 2);
  const yaml = YAML.stringify(document, { aliasDuplicateObjects: false });
  app.get('/openapi/v1.json', async (_request, reply) => reply.type('application/json; charset=utf-8').send(json));
  app.get('/openapi/v1.yaml', async (_request, reply) => reply.type('application/yaml; charset=utf-8').send(yaml));
}
