-- The audit log (projection `audit`, projections/audit/projection.ts; docs/api.md "Audit log"): one
-- row per event of a command, in the organization it concerns. A new installation's projector, or
-- an upgraded one's, builds it from the whole log at its next start (no checkpoint yet).

-- Log order, for events of the same instant (a rebuild draws the same numbers in the same order).
CREATE SEQUENCE audit_event_seq;

CREATE TABLE audit_events (
  -- 0: a person's own event (their account) before their first membership, which moves it there.
  org_id integer NOT NULL,
  -- The event's id: a rebuild gives every row the same id.
  id uuid NOT NULL,
  seq bigint NOT NULL,
  occurred_at timestamptz NOT NULL,
  occurred_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(occurred_at)) STORED,
  action text NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  resource_external_key text,
  actor_type text NOT NULL,
  actor_id text,
  actor_name text,
  request_id text,
  changes jsonb,
  PRIMARY KEY (org_id, id)
);

-- The list, newest first, and each filter with it (projections/audit/queries.ts).
CREATE INDEX audit_events_recent ON audit_events (org_id, occurred_at DESC, seq DESC);
CREATE INDEX audit_events_resource ON audit_events (org_id, resource_type, resource_id, occurred_at DESC, seq DESC);
CREATE INDEX audit_events_resource_id ON audit_events (org_id, resource_id, occurred_at DESC, seq DESC);
CREATE INDEX audit_events_actor ON audit_events (org_id, actor_type, actor_id, occurred_at DESC, seq DESC);
CREATE INDEX audit_events_actor_id ON audit_events (org_id, actor_id, occurred_at DESC, seq DESC);
CREATE INDEX audit_events_action ON audit_events (org_id, action, occurred_at DESC, seq DESC);

-- What the audit projection knows of each resource, for the `from` of an update's changes, an
-- asset's or location's external key, a person's email and memberships. Read by this projection
-- only (a projection reads its own tables), so a rebuild gives the same rows. org_id 0: a person
-- (`user`), who belongs to no one organization.
CREATE TABLE audit_resource_states (
  org_id integer NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  fields jsonb NOT NULL,
  PRIMARY KEY (org_id, resource_type, resource_id)
);
-- A person's memberships (resource_type 'membership', resource_id their user id), in every org.
CREATE INDEX audit_resource_states_by_resource ON audit_resource_states (resource_type, resource_id);
