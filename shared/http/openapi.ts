import type { FastifyInstance } from 'fastify';
import YAML from 'yaml';
import { z } from 'zod';
import { ERROR_TITLES, MAX_ID, type FieldCode } from '../errors.js';
import type { HttpMethod, RouteDefinition } from './routes.js';
import { EXPORT_MEDIA_TYPES } from './export.js';
import { TEXT_PATH_PARAMS } from './validation.js';

/**
 * The machine-readable contract (docs/api.md "OpenAPI documents and typed clients"): an OpenAPI 3.1 document generated from the
 * same route definitions and zod schemas that validate requests. Built once at start.
 *
 * Each operation lists exactly what the request pipeline (routes.ts, errors-plugin.ts) and its
 * handler can answer, with the headers of each answer. What no operation can describe (OPTIONS,
 * an undeclared method, an unknown path) is in `components.responses`, named in info.description.
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

// zod's `.int()` bounds an integer by JavaScript's safe range; that is no rule of the contract.
const SAFE_INTEGER = Number.MAX_SAFE_INTEGER;

function tidy(ctx: { jsonSchema: Json }): void {
  const json = ctx.jsonSchema;
  // Ids are int64 on the wire (docs/api.md "Ids"): body id fields carry no maximum in the document (the
  // server checks them), and response ids have none either (widening the ceiling is additive).
  if (json.format === 'int64') delete json.maximum;
  if (json.minimum === -SAFE_INTEGER) delete json.minimum;
  if (json.maximum === SAFE_INTEGER) delete json.maximum;
}

/**
 * The JSON Schema of a zod schema as the document embeds it: no `$schema` (JSON Schema 2020-12
 * allows it only at a schema resource's root, and the document's dialect is declared once), ids
 * without a maximum, no JavaScript safe-integer bounds. Request bodies use `input`, views `output`.
 */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output' = 'output'): Json {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io, unrepresentable: 'any', override: tidy }) as Json;
  return json;
}

/** `{ "data": <item> }` (and any other members, e.g. a rename's count): closed, like the views. */
export function dataEnvelopeSchema(item: Json, others: Record<string, Json> = {}): Json {
  return {
    type: 'object',
    required: ['data', ...Object.keys(others)],
    properties: { data: item, ...others },
    additionalProperties: false,
  };
}

const errorSchema: Json = {
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: {
      type: 'object',
      required: ['type', 'title', 'status', 'detail', 'instance', 'request_id'],
      additionalProperties: false,
      properties: {
        type: { type: 'string', enum: Object.keys(ERROR_TITLES), 'x-extensible-enum': true, description: 'Branch on this; new types may appear.' },
        title: { type: 'string', description: 'Fixed per type.' },
        status: { type: 'integer', minimum: 400, maximum: 599, description: 'Equals the HTTP status.' },
        detail: { type: 'string', description: 'Human explanation; for validation_error the first field message, then "(and N more validation errors)".' },
        instance: { type: 'string', description: 'Request path.' },
        request_id: { type: 'string', minLength: 1, description: 'Equals the X-Request-ID response header.' },
        fields: {
          type: 'array',
          minItems: 1,
          description: 'Present only for validation_error: one entry per failing field.',
          items: {
            type: 'object',
            required: ['field', 'code', 'message'],
            additionalProperties: false,
            properties: {
              field: { type: 'string', description: 'snake_case JSON key, path-parameter name or query-parameter name' },
              code: { type: 'string', enum: FIELD_CODES, 'x-extensible-enum': true },
              message: { type: 'string' },
              params: { type: 'object', additionalProperties: true, description: 'Constraint metadata: max_length, min_length, allowed_values, min, max…' },
            },
          },
        },
      },
    },
  },
};

const ERROR_REF = { $ref: '#/components/schemas/Error' };

/** Response headers (components.headers), each one documented once. */
const HEADERS: Record<string, Json> = {
  'X-Request-ID': {
    description: "The request's correlation id: the client's own X-Request-ID echoed unchanged, otherwise a ULID made by the server. Equals error.request_id.",
    required: true,
    schema: { type: 'string', minLength: 1 },
  },
  'X-RateLimit-Limit': {
    description: "Size of the calling API key's token bucket (requests).",
    required: true,
    schema: { type: 'integer', minimum: 1 },
  },
  'X-RateLimit-Remaining': {
    description: 'Whole requests left in the bucket. Responses that take no token (no valid key yet, OPTIONS, a session token) show a full bucket.',
    required: true,
    schema: { type: 'integer', minimum: 0 },
  },
  'X-RateLimit-Reset': {
    description: 'Seconds until the bucket is full again (0 when it is full).',
    required: true,
    schema: { type: 'integer', minimum: 0 },
  },
  'Retry-After': { description: 'Whole seconds to wait before retrying.', required: true, schema: { type: 'integer', minimum: 1 } },
  Location: { description: 'Path of the created resource.', required: true, schema: { type: 'string', format: 'uri-reference' } },
  Allow: { description: 'The methods the path answers (HEAD wherever GET), comma-separated.', required: true, schema: { type: 'string' } },
  'WWW-Authenticate': { description: 'The authentication scheme the API expects.', required: true, schema: { type: 'string', const: 'Bearer realm="tracking-api"' } },
  'Content-Disposition': {
    description: 'An export only (Accept: text/csv or XLSX, docs/api.md "Export"): the file\'s name, `<resource>-<YYYYMMDDTHHMMSSZ>.csv` or `.xlsx`.',
    required: false,
    schema: { type: 'string', pattern: '^attachment; filename="[a-z-]+-[0-9]{8}T[0-9]{6}Z\\.(csv|xlsx)"$' },
  },
};

type HeaderName = keyof typeof HEADERS;

/** On every response of a listener (request-id.ts, server.ts). */
const EVERY_RESPONSE: HeaderName[] = ['X-Request-ID', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

/** Headers particular to a status. */
const STATUS_HEADERS: Record<number, HeaderName[]> = {
  201: ['Location'],
  401: ['WWW-Authenticate'],
  405: ['Allow'],
  429: ['Retry-After'],
  503: ['Retry-After'],
};

function headerRefs(names: readonly HeaderName[]): Json {
  return Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
}

function response(status: number, description: string, schema: Json | undefined, extraHeaders: HeaderName[] = []): Json {
  return {
    description,
    headers: headerRefs([...EVERY_RESPONSE, ...(STATUS_HEADERS[status] ?? []), ...extraHeaders]),
    ...(schema ? { content: { 'application/json': { schema } } } : {}),
  };
}

// Methods whose bodies Fastify reads (and so may find over the 1 MiB limit), declared or not.
const METHODS_WITH_BODIES: ReadonlySet<HttpMethod> = new Set(['POST', 'PATCH', 'DELETE']);
// What a handler may answer by itself, beyond what the pipeline answers for every route.
const HANDLER_STATUSES: ReadonlySet<number> = new Set([404, 409, 422]);

function pathParamNames(path: string): string[] {
  return [...path.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]!);
}

/**
 * The errors the request pipeline can answer for a route, in the contract's check order: route,
 * method, authentication, rate limit, scope, content type, path ids, query, body; and the
 * failures of any request. 405 is not among them: a declared operation is never refused its
 * method (components.responses.MethodNotAllowed).
 */
function pipelineErrors(route: RouteDefinition): Record<number, string> {
  const hasPathIds = pathParamNames(route.path).some((name) => !TEXT_PATH_PARAMS.has(name));
  const invalid = [
    route.query ? 'an unknown or invalid query parameter' : 'a query parameter (this operation takes none: unknown_field)',
    ...(hasPathIds ? ['a path id that is not an integer in 1..2147483647'] : []),
    ...(route.body ? ['an invalid body field (every failing field at once)'] : []),
  ];
  const errors: Record<number, string> = {
    400:
      `validation_error: ${invalid.join('; ')}.` +
      (route.body ? ' bad_request: a body that is not JSON, not an object, or with a field of the wrong JSON type.' : '') +
      (METHODS_WITH_BODIES.has(route.method) && !route.body ? ' bad_request: a body that cannot be read (its Content-Type or length is malformed).' : ''),
    401: route.apiKeysOnly
      ? 'unauthorized: a missing, malformed, revoked or expired API key, or a session token (this operation takes API keys only)'
      : 'unauthorized: a missing, malformed, revoked or expired key',
  };
  if (route.scope || route.anyOfScopes) {
    errors[403] = `Missing required scope: ${route.scope ?? route.anyOfScopes!.join(' or ')} (forbidden; also a session token minted without an organization)`;
  } else if (!route.apiKeysOnly) {
    errors[403] = 'forbidden: a session token minted without an organization';
  }
  if (pathParamNames(route.path).length > 0) errors[404] = 'not_found: no such live resource in the organization of the key';
  if (METHODS_WITH_BODIES.has(route.method)) errors[413] = `payload_too_large: a body over ${route.rawBody ? `${route.rawBody.maxBytes / 1024 / 1024} MiB` : '1 MiB'}`;
  if (route.rawBody) errors[415] = `unsupported_media_type: ${route.rawBody.detail}`;
  if (route.body) {
    errors[415] =
      route.method === 'PATCH'
        ? 'unsupported_media_type: Content-Type must be application/merge-patch+json on PATCH operations'
        : 'unsupported_media_type: Content-Type must be application/json';
  }
  errors[429] = 'rate_limited: the key has used its requests; wait Retry-After seconds';
  errors[500] = 'internal_error: an unhandled failure; retry with exponential backoff';
  errors[503] = 'service_unavailable: the database or event store cannot be reached, or the service is shutting down; retry after Retry-After seconds';
  return errors;
}

function parameters(route: RouteDefinition): Json[] {
  const list: Json[] = [];
  for (const name of pathParamNames(route.path)) {
    list.push(
      TEXT_PATH_PARAMS.has(name)
        ? { name, in: 'path', required: true, schema: { type: 'string', minLength: 1, maxLength: 255 } }
        : { name, in: 'path', required: true, schema: { type: 'integer', format: 'int64', minimum: 1, maximum: MAX_ID } },
    );
  }
  for (const [name, param] of Object.entries(route.query ?? {})) {
    list.push({
      name,
      in: 'query',
      required: param.required === true,
      ...(param.description ? { description: param.description } : {}),
      ...(param.repeatable ? { style: 'form', explode: true, schema: { type: 'array', items: param.jsonSchema } } : { schema: param.jsonSchema }),
    });
  }
  return list;
}

function responses(route: RouteDefinition): Json {
  const pipeline = pipelineErrors(route);
  const statuses = new Set<number>([...Object.keys(route.responses).map(Number), ...Object.keys(pipeline).map(Number)]);
  const out: Json = {};
  for (const status of [...statuses].sort((a, b) => a - b)) {
    const declared = route.responses[status];
    if (status >= 400 && declared && !(status in pipeline) && !HANDLER_STATUSES.has(status)) {
      throw new Error(`${route.method} ${route.path} declares ${status}, which neither its pipeline nor a handler can answer`);
    }
    // A route's own 400 adds to what the pipeline checks; its other statuses say it more exactly.
    const description = status === 400 && declared ? `${pipeline[400]} ${declared.description}` : (declared?.description ?? pipeline[status]!);
    if (status >= 400) out[status] = response(status, description, ERROR_REF);
    else if (status === 200 && route.export) out[status] = exportingResponse(response(status, declared!.description, declared!.schema, ['Content-Disposition']));
    else out[status] = response(status, declared!.description, declared!.schema);
  }
  return out;
}

/** A list's 200 that also answers its export (docs/api.md "Export"): the whole list as CSV or XLSX beside the JSON page. */
function exportingResponse(answer: Json): Json {
  const content = answer.content as Json;
  return {
    ...answer,
    description: `${String(answer.description)}; with Accept: text/csv or XLSX, the whole list as a file (every row, limit and offset not read)`,
    content: {
      ...content,
      [EXPORT_MEDIA_TYPES.csv]: { schema: { type: 'string', description: 'RFC 4180, CRLF, UTF-8 without BOM: a header row, then one row per item' } },
      [EXPORT_MEDIA_TYPES.xlsx]: { schema: { type: 'string', description: 'an XLSX workbook of one sheet: a header row, then one row per item' } },
    },
  };
}

function operation(route: RouteDefinition): Json {
  const params = parameters(route);
  const op: Json = {
    operationId: route.operationId,
    summary: route.summary,
    tags: [route.tag],
    'x-required-scopes': route.scope ? [route.scope] : [...(route.anyOfScopes ?? [])],
    ...(params.length > 0 ? { parameters: params } : {}),
    responses: responses(route),
  };
  if (route.rawBody) {
    op.requestBody = { required: true, content: Object.fromEntries(route.rawBody.mediaTypes.map((type) => [type, { schema: { type: 'string', format: 'binary' } }])) };
  }
  if (route.body) {
    const mediaType = route.method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    op.requestBody = { required: true, content: { [mediaType]: { schema: jsonSchemaOf(route.body, 'input') } } };
  }
  return op;
}

/** HEAD wherever GET (docs/api.md "Requests and responses"): the same checks and headers, without a body. */
function headOperation(get: Json): Json {
  const answers = Object.fromEntries(
    Object.entries(get.responses as Record<string, Json>).map(([status, { content: _body, ...rest }]) => [status, rest]),
  );
  return {
    ...get,
    operationId: `${String(get.operationId)}Head`,
    summary: `${String(get.summary)} (HEAD: the GET's status and headers, no body)`,
    responses: answers,
  };
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
  description:
    'Multi-tenant master data (assets, locations, tags) and tracking views. Every operation lists the scopes it needs in x-required-scopes. ' +
    'Handheld scan submissions have their own document on the ingest listener (GET /openapi/v1.json there).',
  serverUrl: '/api/v1',
};

const GENERAL_RULES =
  '\n\nEvery response carries X-Request-ID and the X-RateLimit-* headers. Besides the operations below, every path answers ' +
  'OPTIONS with 204 and Allow, without a key (components.responses.Options: reserved for cross-origin preflight, which is never granted), ' +
  'and any other method it does not declare with 405 and Allow (components.responses.MethodNotAllowed); a path under the server URL ' +
  'that the document does not declare answers 404 (components.responses.UnknownRoute).';

export function buildOpenApiDocument(routes: readonly RouteDefinition[], listener: OpenApiListener = PUBLIC_API): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const item = (paths[route.path] ??= {});
    const op = operation(route);
    item[route.method.toLowerCase()] = op;
    if (route.method === 'GET') item.head = headOperation(op);
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    info: { title: listener.title, version: '1.0.0', description: listener.description + GENERAL_RULES },
    servers: [{ url: listener.serverUrl }],
    security: [{ bearerAuth: [] }],
    tags: [...new Set(routes.map((r) => r.tag))].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: { Error: errorSchema },
      headers: HEADERS,
      responses: {
        Options: response(204, 'OPTIONS on any declared path: no key needed, no body; Allow lists the methods of the path.', undefined, ['Allow']),
        MethodNotAllowed: response(
          405,
          'method_not_allowed: a method the path does not declare. Allow and the detail ("Allowed methods: GET, HEAD, …") list the methods of the path. Checked before authentication.',
          ERROR_REF,
        ),
        UnknownRoute: response(404, 'not_found: no operation is declared at this path; detail "Unknown API route: <path>".', ERROR_REF),
      },
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
