import type { ServiceContext } from '../../shared/service-context.js';
import { orgOf } from '../../shared/auth/org.js';
import { canonicalBodyHash, submitHandheldScans } from '../../shared/domain/scans/commands.js';
import { HANDHELD_FIELD_ORDER, handheldAnswerSchema, handheldSubmissionSchema } from '../../shared/domain/scans/schema.js';
import { defineRoute, type RouteDefinition } from '../../shared/http/routes.js';
import { jsonSchemaOf } from '../../shared/http/openapi.js';
import type { IngestMetrics } from './metrics.js';

/** `POST /ingest/v1/scans`: a handheld backend's submission of reads taken at one location. */
export function handheldRoutes(ctx: ServiceContext, metrics: IngestMetrics): RouteDefinition[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/scans',
      operationId: 'submitHandheldScans',
      summary: 'Submit reads taken by a handheld at one location (idempotent per submission_id)',
      tag: 'Scans',
      scope: 'scans:write',
      body: handheldSubmissionSchema,
      bodyFieldOrder: HANDHELD_FIELD_ORDER,
      responses: {
        202: { description: 'Recorded (or, for a submission_id already received, the first answer with duplicate: true)', schema: jsonSchemaOf(handheldAnswerSchema) },
        400: { description: 'fk_not_found: a location that names no live location (or a tag that is not a location\'s); ambiguous_fields: two forms of the location.' },
        409: { description: 'submission_id was already used with a different body' },
      },
      async handler({ principal, body, sentBody }) {
        const orgId = orgOf(principal);
        const receivedUs = Date.now() * 1000;
        const { answer, unknownByCause } = await submitHandheldScans(ctx, {
          orgId,
          submissionId: body.submission_id,
          deviceId: body.device_id,
          location: body.location,
          // observed_at defaults to the time of receipt.
          reads: body.reads.map((read) => ({ tag_type: read.tag_type, value: read.value, observedUs: read.observed_at ?? receivedUs, rssi: read.rssi ?? null })),
          bodySha256: canonicalBodyHash(sentBody),
        });
        if (!answer.duplicate) metrics.recorded('handheld', answer.accepted, unknownByCause);
        return { status: 202, body: { data: answer } };
      },
    }),
  ];
}
