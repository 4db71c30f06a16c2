import type { Projection } from '../services/projector/projection.js';

/** Every projection of the live read model, in the order they are started. */
export function allProjections(): Projection[] {
  return [];
}
