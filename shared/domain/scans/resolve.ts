import type { TagLookup } from '../read-model-queries.js';
import type { TagResolution } from './read-codec.js';

/**
 * What a read of a tag places (docs/scan-ingestion.md "How a read is resolved"): the asset that holds the existing, active,
 * currently effective tag; otherwise nothing, with the cause an operator needs to fix it.
 */
export function resolveTag(lookup: TagLookup): TagResolution {
  switch (lookup.state) {
    case 'unknown':
      return { assetId: null, cause: 'unknown_tag' };
    case 'retired':
      return { assetId: null, cause: 'retired_tag' };
    case 'existing':
      if (lookup.ownerType === 'location') return { assetId: null, cause: 'location_tag' };
      return lookup.usable ? { assetId: lookup.ownerId, cause: null } : { assetId: null, cause: 'retired_tag' };
  }
}

/** The location a shelf label names: an existing, active, currently effective tag of a location. */
export function locationOfTag(lookup: TagLookup): number | null {
  return lookup.state === 'existing' && lookup.ownerType === 'location' && lookup.usable ? lookup.ownerId : null;
}
