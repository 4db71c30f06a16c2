-- Roles admin, operator and viewer (docs/web-app.md, "People and roles"): `member`, the earlier
-- name of `operator`, is read as `operator` from the events that hold it, and each membership
-- keeps the revision of the user's stream that last granted or changed it, which a session token
-- names (docs/web-app.md, "Session tokens"): a token outlives no change of its person's role.
--
-- The rows are not rewritten here: the people tables are emptied and the projection's checkpoint
-- removed, so the projector builds them again from the log at its next start, reading each
-- event's role as it is named now.
ALTER TABLE memberships ADD COLUMN revision bigint NOT NULL DEFAULT 0;
ALTER TABLE memberships ALTER COLUMN revision DROP DEFAULT;
DELETE FROM projection_held_events WHERE projection = 'people';
DELETE FROM projection_set_aside WHERE projection = 'people';
DELETE FROM projection_checkpoints WHERE name = 'people';
TRUNCATE users, memberships, invitations;
