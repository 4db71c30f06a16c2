import type { Principal } from '../auth/principal.js';
import type { CommandActor } from '../event-store/command-context.js';

/**
 * Who asks, as the events of a public API command record it (docs/design.md, "Who did it: actor and request id"): an
 * API key by its id and name; a person's session token by their user id (the email when the token
 * names no user) and their email.
 */
export function principalActor(principal: Principal): CommandActor {
  if (principal.kind === 'api_key') return { type: 'api_key', id: principal.keyId, name: principal.keyName ?? null };
  return { type: 'user', id: principal.userId ?? principal.subject, name: principal.subject };
}
