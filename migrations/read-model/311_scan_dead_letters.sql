-- Fixed-reader messages received over MQTT that are not JSON or match neither shape
-- (ReaderMessageDeadLettered; projection `readers`, projections/readers/projection.ts).
-- `id` is the event's id: the same message delivered twice is one row.
CREATE TABLE scan_dead_letters (
  id uuid PRIMARY KEY,
  transport text NOT NULL,
  topic text NOT NULL,
  reason text NOT NULL,
  reader_id text,
  org_id integer,
  payload_preview text NOT NULL,
  received_at timestamptz NOT NULL,
  received_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(received_at)) STORED
);
CREATE INDEX scan_dead_letters_received ON scan_dead_letters (received_at DESC, id);
CREATE INDEX scan_dead_letters_org ON scan_dead_letters (org_id, received_at DESC, id);
