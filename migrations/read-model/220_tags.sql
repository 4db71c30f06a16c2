-- Tags of assets and locations (projection `tags`, projections/master-data/tags.ts). A detached
-- tag, or one retired with its owner, keeps its row with `deleted_at` set.
CREATE TABLE tags (
  id integer PRIMARY KEY,
  org_id integer NOT NULL,
  owner_type text NOT NULL CHECK (owner_type IN ('asset', 'location')),
  owner_id integer NOT NULL,
  tag_type text NOT NULL,
  value text NOT NULL,
  is_active boolean NOT NULL,
  valid_from timestamptz,
  valid_to timestamptz,
  created_at timestamptz NOT NULL,
  deleted_at timestamptz
);

-- A parent's tags in creation order (tag sub-resource lists, embedded tags of many owners at once).
CREATE INDEX tags_owner ON tags (org_id, owner_type, owner_id, created_at, id) WHERE deleted_at IS NULL;
-- Resolving a scanned value to its live tag (RFID values match case-insensitively).
CREATE INDEX tags_org_type_value ON tags (org_id, tag_type, upper(value)) WHERE deleted_at IS NULL;
