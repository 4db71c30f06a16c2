-- One row per projection: the global position of the last event it has applied, written in the
-- same transaction as the read-model changes of that batch.
CREATE TABLE projection_checkpoints (
  name text PRIMARY KEY,
  commit_position xid8 NOT NULL,
  prepare_position bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
