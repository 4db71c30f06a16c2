import type { Projection } from '../services/projector/projection.js';
import { authProjection } from './auth/index.js';
import { assetsProjection } from './master-data/assets.js';
import { locationsProjection } from './master-data/locations.js';
import { tagsProjection } from './master-data/tags.js';

/** Every projection of the live read model, in the order they are started. */
export function allProjections(): Projection[] {
  return [authProjection, locationsProjection, assetsProjection, tagsProjection];
}
