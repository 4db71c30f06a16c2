import type { Projection } from '../shared/projection/projection.js';
import { authProjection } from './orgs-and-keys/projection.js';
import { assetsProjection } from './assets/projection.js';
import { locationsProjection } from './locations/projection.js';
import { tagsProjection } from './tags/projection.js';
import { trackingProjection } from './tracking/projection.js';
import { readersProjection } from './readers/projection.js';
import { peopleProjection } from './people/projection.js';
import { auditProjection } from './audit/projection.js';
import { alertsProjection } from './alerts/projection.js';
import { webhookEndpointsProjection } from './webhook-endpoints/projection.js';
import { alertRulesProjection } from './alert-rules/projection.js';
import { countsProjection } from './counts/projection.js';

/** Every projection of the current read model, in the order they are started. */
export function allProjections(): Projection[] {
  return [authProjection, peopleProjection, locationsProjection, assetsProjection, tagsProjection, readersProjection, trackingProjection, webhookEndpointsProjection, alertRulesProjection, auditProjection, alertsProjection, countsProjection];
}
