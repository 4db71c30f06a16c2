import { ForbiddenError, NotFoundError, ValidationFailed, fieldErrors } from '../../../shared/errors.js';
import type { ServiceContext } from '../../../shared/service-context.js';
import type { Principal } from '../../../shared/auth/principal.js';
import { defineRoute, type RouteDefinition } from '../../../shared/http/routes.js';
import { dataEnvelopeSchema } from '../../../shared/http/openapi.js';
import { queryParams } from '../../../shared/http/validation.js';
import { listEnvelope, listEnvelopeSchema, pageOf, pagingQuery } from '../../../shared/http/lists.js';
import { principalActor } from '../../../shared/http/command-actor.js';
import { JsonText } from '../../../shared/json/text.js';
import { orgOf } from '../../../shared/auth/org.js';
import { API_PREFIX } from '../prefix.js';
import { CSV_MEDIA_TYPE, FileRefused, XLSX_MEDIA_TYPE, formatOf, readImportFile } from '../../imports/file.js';
import { columnsOf, type ImportResource } from '../../imports/rows.js';
import { getImport, insertImport, listImports, MAX_ERRORS, type ImportView } from '../../imports/jobs.js';
import { importPosted } from '../../imports/worker-signal.js';

/** The /imports routes (docs/api.md, "Import"). */

export const MAX_IMPORT_BYTES = 50 * 1024 * 1024;
const RESOURCES = ['assets', 'locations'] as const;

const importSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'resource', 'status', 'dry_run', 'rows', 'created', 'updated', 'unchanged', 'rejected', 'errors', 'created_at', 'finished_at'],
  properties: {
    id: { type: 'integer', format: 'int64', minimum: 1 },
    resource: { type: 'string', enum: [...RESOURCES] },
    status: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] },
    dry_run: { type: 'boolean' },
    rows: { type: 'integer', minimum: 0, description: 'rows of the file after the header (0 until a worker has read it)' },
    created: { type: 'integer', minimum: 0 },
    updated: { type: 'integer', minimum: 0 },
    unchanged: { type: 'integer', minimum: 0 },
    rejected: { type: 'integer', minimum: 0, description: 'rows with an error' },
    errors: {
      type: 'array',
      maxItems: MAX_ERRORS,
      description: 'the first 1,000 row errors, by row',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['row', 'field', 'code', 'message'],
        properties: { row: { type: 'integer', minimum: 0, description: 'from 1 after the header' }, field: { type: 'string' }, code: { type: 'string' }, message: { type: 'string' } },
      },
    },
    created_at: { type: 'string', format: 'date-time' },
    finished_at: { type: ['string', 'null'], format: 'date-time' },
  },
};

const single = dataEnvelopeSchema(importSchema);

const readScope = (resource: ImportResource) => `${resource}:read`;
const writeScope = (resource: ImportResource) => `${resource}:write`;

/** The resources whose imports the caller may see: by its scopes (an API key), or both (a person, by member role). */
function readable(principal: Principal): ImportResource[] {
  return principal.kind === 'api_key' ? RESOURCES.filter((r) => principal.scopes.includes(readScope(r))) : [...RESOURCES];
}

function view(row: ImportView): JsonText {
  return new JsonText(JSON.stringify({ data: row }));
}

export function importRoutes(ctx: ServiceContext): RouteDefinition[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/imports',
      operationId: 'createImport',
      summary: 'Import assets or locations from a CSV or XLSX file (a background job; dry_run applies nothing)',
      tag: 'Imports',
      scope: null,
      anyOfScopes: ['assets:write', 'locations:write'],
      sessionMemberRole: 'operator',
      rawBody: {
        mediaTypes: [CSV_MEDIA_TYPE, XLSX_MEDIA_TYPE],
        detail: `Content-Type must be ${CSV_MEDIA_TYPE} or ${XLSX_MEDIA_TYPE}`,
        maxBytes: MAX_IMPORT_BYTES,
      },
      query: {
        resource: { ...queryParams.oneOf(RESOURCES), description: 'required: what the rows are' },
        dry_run: { ...queryParams.bool(), description: 'validate every row against the current state and apply nothing (default false)' },
      },
      responses: {
        202: { description: 'Accepted: the job, queued; Location names it', schema: single },
        400: { description: 'resource missing; unknown_field: a column the resource does not have; required: no external_key column; invalid_value on file: neither CSV nor XLSX, or an XLSX that expands too far. Nothing is imported.' },
      },
      async handler({ request, principal, query, body }) {
        const orgId = orgOf(principal);
        const resource = query.resource;
        if (!resource) throw new ValidationFailed([fieldErrors.required('resource')]);
        if (principal.kind === 'api_key' && !principal.scopes.includes(writeScope(resource))) throw new ForbiddenError(writeScope(resource));
        const file = body as unknown as Buffer;
        const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        const format = formatOf(type);
        try {
          const { header } = await readImportFile(format, file, { headerOnly: true });
          columnsOf(resource, header);
        } catch (error) {
          if (error instanceof FileRefused) throw new ValidationFailed([fieldErrors.invalidValue('file', error.message)]);
          throw error;
        }
        const job = await insertImport(ctx.pool, { orgId, resource, dryRun: query.dry_run ?? false, format, file, actor: principalActor(principal), requestId: request.id });
        importPosted();
        return { status: 202, body: view(job), headers: { Location: `${API_PREFIX}/imports/${job.id}` } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/imports',
      operationId: 'listImports',
      summary: 'List imports, newest first (those of the resources the key can read)',
      tag: 'Imports',
      scope: null,
      anyOfScopes: ['assets:read', 'locations:read'],
      sessionMemberRole: 'viewer',
      query: { limit: pagingQuery([]).limit, offset: pagingQuery([]).offset },
      responses: { 200: { description: 'A page of imports', schema: listEnvelopeSchema(importSchema) } },
      async handler({ principal, query }) {
        const { limit, offset } = pageOf(query);
        const page = await listImports(ctx.pool, orgOf(principal), readable(principal), limit, offset);
        return { status: 200, body: listEnvelope(new JsonText(JSON.stringify(page.data)), limit, offset, page.total) };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/imports/{import_id}',
      operationId: 'getImport',
      summary: 'Read an import: its status, counts and row errors (poll it for progress)',
      tag: 'Imports',
      scope: null,
      anyOfScopes: ['assets:read', 'locations:read'],
      sessionMemberRole: 'viewer',
      responses: { 200: { description: 'The import', schema: single }, 404: { description: 'No such import in this organization' } },
      async handler({ principal, params }) {
        const job = await getImport(ctx.pool, orgOf(principal), params.import_id!);
        if (!job) throw new NotFoundError(`Import ${params.import_id} not found`);
        if (!readable(principal).includes(job.resource)) throw new ForbiddenError(readScope(job.resource));
        return { status: 200, body: view(job) };
      },
    }),
  ];
}
