import type { Projection } from '../services/projector/projection.js';
import { authProjection } from './auth/index.js';

/** Every projection of the live read model, in the order they are started. */
export function allProjections(): Projection[] {
  return [authProjection];
}
