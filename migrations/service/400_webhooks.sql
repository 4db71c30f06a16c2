-- Webhooks (docs/design.md "Webhooks"): a partner's configuration and the deliveries made to it.
-- Not events and not a read model: the endpoints are configuration with a secret, the rest is the
-- webhooks role's own working state, so a rebuild or a replay of the read models neither needs
-- nor touches it.

CREATE TABLE webhook_endpoints (
  id integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (MAXVALUE 2147483647),
  org_id integer NOT NULL,
  url text NOT NULL,
  description text,
  event_types text[] NOT NULL,
  is_active boolean NOT NULL DEFAULT true,
  disabled_reason text,
  not_seen_after_seconds integer NOT NULL,
  -- The signing secret (whsec_…), shown once; the one it replaced signs too until previous_until.
  secret text NOT NULL,
  previous_secret text,
  previous_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_by_org ON webhook_endpoints (org_id, id);

-- Where each asset is as the webhooks role has followed the log: the location of its latest read
-- (observed time, then log order) and the keys of the reads at that very instant (a read that
-- comes twice is counted once, as in the tracking projection).
CREATE TABLE webhook_asset_positions (
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  location_id integer NOT NULL,
  last_seen_us bigint NOT NULL,
  last_read_keys uuid[] NOT NULL,
  PRIMARY KEY (org_id, asset_id)
);
CREATE INDEX webhook_asset_positions_last_seen ON webhook_asset_positions (org_id, last_seen_us);

-- A silence announced to an endpoint (asset.not_seen), until the asset's next read.
CREATE TABLE webhook_silences (
  endpoint_id integer NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  last_seen_us bigint NOT NULL,
  PRIMARY KEY (endpoint_id, asset_id)
);
CREATE INDEX webhook_silences_by_asset ON webhook_silences (org_id, asset_id);

-- One event to one endpoint: its body is fixed when the event is derived, so every attempt (and
-- a redelivery) sends the same bytes under the same webhook-id.
CREATE TABLE webhook_deliveries (
  id integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (MAXVALUE 2147483647),
  endpoint_id integer NOT NULL REFERENCES webhook_endpoints ON DELETE CASCADE,
  org_id integer NOT NULL,
  asset_id integer NOT NULL,
  webhook_id text NOT NULL,
  event_type text NOT NULL,
  body text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempt integer NOT NULL DEFAULT 0,
  response_status integer,
  duration_ms integer,
  error text,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  -- A worker holds the delivery until then (a crashed worker's claim runs out).
  leased_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
-- The API's list (newest first) and the ordering rule (earlier pending of the same asset).
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id DESC);
CREATE INDEX webhook_deliveries_pending_by_asset ON webhook_deliveries (endpoint_id, asset_id, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
