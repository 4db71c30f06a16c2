-- Webhook endpoints as events (docs/design.md "Webhooks"): the endpoint commands append
-- WebhookEndpointCreated/Updated/Deleted/SecretRotated to the organization's stream
-- `webhook-endpoints-<org>`, and the `webhook-endpoints` projection maintains webhook_endpoints
-- from them. Secrets are not events: a created or rotated secret is staged here, sealed, before
-- the append, and the event names it by `secret_id`; the projection moves it onto the endpoint
-- and deletes it here in the same transaction. A staged secret that no event names (an append
-- that failed) is never read.
CREATE TABLE webhook_endpoint_secrets (
  secret_id text PRIMARY KEY,
  endpoint_id integer NOT NULL,
  secret_encrypted bytea NOT NULL,
  previous_secret_encrypted bytea,
  encryption_key_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The revision of each organization's endpoint stream that webhook_endpoints reflects. The
-- projection writes the service table itself, not a read-model table, so a rebuild or a replay
-- (which apply the log again from its start) must change nothing there: an event at or below
-- this revision is skipped, and no rebuild ever deletes an endpoint.
CREATE TABLE webhook_endpoint_revisions (
  org_id integer PRIMARY KEY,
  revision bigint NOT NULL
);
