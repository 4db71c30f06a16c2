-- Single sign-on accepts the invitations pending for the address it signs in (docs/web-app.md,
-- "Single sign-on"): found by email, newest first, among those neither accepted nor cancelled.
CREATE INDEX invitations_pending_by_email ON invitations (email, issued_at DESC, id DESC) WHERE accepted_at IS NULL AND cancelled_at IS NULL;
