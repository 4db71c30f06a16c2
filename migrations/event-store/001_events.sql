-- The log. `global_position` is taken from a sequence at insert time; transactions commit out of
-- order, so readers of the global log order by (tx_id, global_position) and only read
-- transactions older than the current snapshot's xmin: every such transaction has finished, so
-- no event can later appear before a position a reader has passed.
CREATE TABLE event_streams (
  stream_id text PRIMARY KEY,
  revision bigint NOT NULL
);

CREATE TABLE events (
  global_position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  event_id uuid NOT NULL UNIQUE,
  stream_id text NOT NULL,
  stream_revision bigint NOT NULL,
  type text NOT NULL,
  data jsonb NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (stream_id, stream_revision)
);

CREATE INDEX events_global_order ON events (tx_id, global_position);
