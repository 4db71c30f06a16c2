-- Scan events moved out of the log into segment files (shared/archive, docs/design.md "The scan
-- archive"). A row is written in the same transaction that deletes the segment's events from
-- `events`: an event is in the log or in a committed segment, never both and never neither.
-- Segment i holds the archived events of the log range (after, last]; the events of that range
-- that were not archived (master data, each scan stream's last event) stay in `events`.
CREATE TABLE archived_segments (
  file text PRIMARY KEY,
  after_commit xid8 NOT NULL,
  after_prepare bigint NOT NULL,
  last_commit xid8 NOT NULL,
  last_prepare bigint NOT NULL,
  events integer NOT NULL CHECK (events > 0),
  -- The file's size, and the size of its uncompressed content.
  bytes bigint NOT NULL,
  raw_bytes bigint NOT NULL,
  -- SHA-256 of the file, in hex: readers refuse a file that does not match.
  sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  oldest_recorded_at timestamptz NOT NULL,
  newest_recorded_at timestamptz NOT NULL,
  archived_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (last_commit, last_prepare),
  CHECK ((after_commit, after_prepare) < (last_commit, last_prepare))
);
