import type { Projection } from '../services/projector/projection.js';
import { authProjection } from './auth/index.js';
import { assetsProjection } from './master-data/assets.js';
import { locationsProjection } from './master-data/locations.js';
import { tagsProjection } from './master-data/tags.js';

/** Every projection of the live read model, in the order they are started. */
export function allProjections(): Projection[] {
  return [authProjection, locationsProjection, assetsProjection, tagsProjection];
}

let consumersByType: Map<string, string[]> | null = null;

/**
 * Names of the projections that read any of these event types: the ones a command must wait for
 * before its own events are visible. Projections that ignore them have nothing of the command's to
 * show.
 */
export function projectionsConsuming(eventTypes: Iterable<string>): string[] {
  if (!consumersByType) {
    consumersByType = new Map();
    for (const projection of allProjections()) {
      for (const type of projection.eventTypes) consumersByType.set(type, [...(consumersByType.get(type) ?? []), projection.name]);
    }
  }
  const names = new Set<string>();
  for (const type of eventTypes) for (const name of consumersByType.get(type) ?? []) names.add(name);
  return [...names];
}
