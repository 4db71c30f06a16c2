import { EventCatalogue } from './catalogue.js';

/**
 * Every event type of the service. Each slice defines its events next to its decider and adds
 * them here, so appends everywhere validate against one catalogue.
 */
export function buildCatalogue(): EventCatalogue {
  const catalogue = new EventCatalogue();
  return catalogue;
}
