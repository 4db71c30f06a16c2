-- An invitation withdrawn by an admin (InvitationCancelled): no longer pending.
ALTER TABLE invitations ADD COLUMN cancelled_at timestamptz;
