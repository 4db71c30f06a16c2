-- How far the webhooks role has followed the alerts' outbox (read-model table `alert_outbox`;
-- docs/design.md "Webhooks"): the key of the last row it queued deliveries for, moved in the
-- transaction that queues them. One row; made by the role's first pass, at the smallest checkpoint
-- of the `alerts` segments then (changes made before the role first ran are not sent). It lives
-- here, not in the read model: a rebuild of `alerts` empties and rewrites the outbox, and must not
-- move it.
CREATE TABLE webhook_alert_cursor (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  position_commit bigint NOT NULL,
  position_prepare bigint NOT NULL,
  org_id integer NOT NULL,
  alert_id text COLLATE "C" NOT NULL,
  change text COLLATE "C" NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
