-- Streams a projection could not apply an event of (docs/design.md "A projection that cannot
-- apply an event"): the failing event, and the stream's later events of that projection, which
-- wait behind it instead of being applied or skipped. Like the checkpoints, one table per
-- read-model schema for all its projections: a rebuild or a replay decides afresh in its own
-- schema, and a rebuild's swap carries the rows of the projections it rebuilt.
CREATE TABLE projection_set_aside (
  projection text NOT NULL,
  stream_id text NOT NULL,
  -- The event that failed: its place in the log (`formatPosition`) and in its stream.
  position text NOT NULL,
  revision bigint NOT NULL,
  event_id text NOT NULL,
  event_type text NOT NULL,
  error text NOT NULL,
  -- When Postgres refused it (e.g. 22008); null for an error of the projection's own code.
  sqlstate text,
  set_aside_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (projection, stream_id)
);

-- The later events of a set-aside stream, for that projection: recorded in stream order, applied
-- by `projections retry` after the failed one.
CREATE TABLE projection_held_events (
  projection text NOT NULL,
  stream_id text NOT NULL,
  revision bigint NOT NULL,
  position text NOT NULL,
  event_id text NOT NULL,
  event_type text NOT NULL,
  held_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (projection, stream_id, revision),
  FOREIGN KEY (projection, stream_id) REFERENCES projection_set_aside ON DELETE CASCADE
);
