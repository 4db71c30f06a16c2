import { authEvents } from '../../services/api/auth/events.js';
import { reservationEvents } from '../../services/api/master-data/reservations.js';
import { EventCatalogue } from './catalogue.js';

/**
 * Every event type of the service. Each slice defines its events next to its decider and adds
 * them here, so appends everywhere validate against one catalogue.
 */
export function buildCatalogue(): EventCatalogue {
  const catalogue = new EventCatalogue();
  catalogue.register(...reservationEvents);
  catalogue.register(...authEvents);
  return catalogue;
}
