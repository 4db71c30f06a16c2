import { assetEvents } from '../../services/api/assets/events.js';
import { authEvents } from '../../services/api/auth/events.js';
import { locationEvents } from '../../services/api/locations/events.js';
import { reservationEvents } from '../../services/api/master-data/reservations.js';
import { tagEvents } from '../../services/api/tags/events.js';
import { EventCatalogue } from './catalogue.js';

/**
 * Every event type of the service. Each slice defines its events next to its decider and adds
 * them here, so appends everywhere validate against one catalogue.
 */
export function buildCatalogue(): EventCatalogue {
  const catalogue = new EventCatalogue();
  catalogue.register(...reservationEvents);
  catalogue.register(...authEvents);
  catalogue.register(...assetEvents, ...tagEvents);
  catalogue.register(...locationEvents);
  return catalogue;
}
