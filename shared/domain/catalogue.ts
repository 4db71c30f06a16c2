import { assetEvents } from './assets/events.js';
import { authEvents } from './orgs-and-keys/events.js';
import { locationEvents, locationTreeEvents } from './locations/events.js';
import { reservationEvents } from './reservations.js';
import { readerEvents } from './readers/events.js';
import { scanEvents } from './scans/events.js';
import { tagEvents } from './tags/events.js';
import { peopleEvents } from './people/events.js';
import { webhookEndpointEvents } from './webhook-endpoints/events.js';
import { alertEvents, alertRuleEvents } from './alerts/events.js';
import { countEvents } from './counts/events.js';
import { EventCatalogue } from '../event-store/catalogue.js';

/**
 * Every event type of the service. Each slice defines its events next to its decider and adds
 * them here, so appends everywhere validate against one catalogue.
 */
export function buildCatalogue(): EventCatalogue {
  const catalogue = new EventCatalogue();
  catalogue.register(...reservationEvents);
  catalogue.register(...authEvents);
  catalogue.register(...peopleEvents);
  catalogue.register(...assetEvents, ...tagEvents);
  catalogue.register(...locationEvents, ...locationTreeEvents);
  catalogue.register(...readerEvents, ...scanEvents);
  catalogue.register(...webhookEndpointEvents);
  catalogue.register(...alertRuleEvents, ...alertEvents);
  catalogue.register(...countEvents);
  return catalogue;
}
