import type pg from 'pg';
import type { RecordedEvent } from '../../shared/event-store/port.js';
import type { Projection } from '../../shared/projection/projection.js';
import { eventsWithRevisionOf } from '../../shared/event-store/catalogue.js';
import { currentMemberRole, invitationEvents, userEvents } from '../../shared/domain/people/events.js';
import { prepared } from '../../shared/db/prepared.js';
import { MEMBERSHIP_CHANGED_CHANNEL } from '../../shared/auth/session-token-states.js';

const peopleProjectionEvents = [...userEvents, ...invitationEvents];

/** Users, their memberships and invitations (`users`, `memberships`, `invitations`); never a password hash. */
export const peopleProjection: Projection = {
  name: 'people',
  tables: ['users', 'memberships', 'invitations'],
  eventTypes: peopleProjectionEvents.map((e) => e.type),
  async apply(events: RecordedEvent[], tx: pg.PoolClient) {
    // Whose memberships changed: told to every api process at commit (their session token caches).
    const membersChanged = new Set<string>();
    for (const event of eventsWithRevisionOf(events, peopleProjectionEvents)) {
      switch (event.type) {
        case 'UserCreated':
          await tx.query(prepared('INSERT INTO users (id, email, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING', [event.data.user_id, event.data.email, event.data.created_at]));
          break;
        case 'PasswordSetupIssued':
          break;
        case 'PasswordSet':
          await tx.query(prepared('UPDATE users SET password_set_at = $2 WHERE id = $1', [event.data.user_id, event.data.set_at]));
          break;
        case 'MembershipGranted':
          membersChanged.add(event.data.user_id);
          await tx.query(
            prepared(
              `INSERT INTO memberships (user_id, org_id, role, created_at, revision) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (user_id, org_id) DO UPDATE SET role = EXCLUDED.role, created_at = EXCLUDED.created_at, revision = EXCLUDED.revision`,
              [event.data.user_id, event.data.org_id, currentMemberRole(event.data.role), event.data.granted_at, String(event.revision)],
            ),
          );
          break;
        case 'MembershipRoleChanged':
          membersChanged.add(event.data.user_id);
          await tx.query(
            prepared('UPDATE memberships SET role = $3, revision = $4 WHERE user_id = $1 AND org_id = $2', [event.data.user_id, event.data.org_id, currentMemberRole(event.data.role), String(event.revision)]),
          );
          break;
        case 'MembershipRemoved':
          membersChanged.add(event.data.user_id);
          await tx.query(prepared('DELETE FROM memberships WHERE user_id = $1 AND org_id = $2', [event.data.user_id, event.data.org_id]));
          break;
        case 'InvitationIssued':
          await tx.query(
            prepared(
              `INSERT INTO invitations (id, org_id, email, role, issued_at, expires_at, issued_by) VALUES ($1, $2, $3, $4, $5, $6, $7)
               ON CONFLICT (id) DO NOTHING`,
              [event.data.invitation_id, event.data.org_id, event.data.email, currentMemberRole(event.data.role), event.data.issued_at, event.data.expires_at, event.data.issued_by],
            ),
          );
          break;
        case 'InvitationAccepted':
          await tx.query(prepared('UPDATE invitations SET accepted_at = $2, accepted_by = $3 WHERE id = $1', [event.data.invitation_id, event.data.accepted_at, event.data.user_id]));
          break;
        case 'InvitationCancelled':
          await tx.query(prepared('UPDATE invitations SET cancelled_at = $2 WHERE id = $1', [event.data.invitation_id, event.data.cancelled_at]));
          break;
      }
    }
    if (membersChanged.size > 0) {
      await tx.query(prepared('SELECT pg_notify($1, user_id) FROM unnest($2::text[]) AS user_id', [MEMBERSHIP_CHANGED_CHANNEL, [...membersChanged]]));
    }
  },
};
