-- Each timestamp of a view also kept as the contract writes it (RFC 3339, UTC, milliseconds, `Z`,
-- as JavaScript's toISOString), computed once when the row is written rather than by to_char on
-- every read: formatting was a fifth of the time of a 50-row page.
-- The function is immutable for what it is used for: a fixed numeric format in UTC, no locale.
CREATE FUNCTION rfc3339(ts timestamptz) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');

ALTER TABLE assets
  ADD COLUMN valid_from_rfc3339 text GENERATED ALWAYS AS (rfc3339(valid_from)) STORED,
  ADD COLUMN valid_to_rfc3339 text GENERATED ALWAYS AS (rfc3339(valid_to)) STORED,
  ADD COLUMN created_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(created_at)) STORED,
  ADD COLUMN updated_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(updated_at)) STORED,
  ADD COLUMN deleted_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(deleted_at)) STORED;

ALTER TABLE locations
  ADD COLUMN valid_from_rfc3339 text GENERATED ALWAYS AS (rfc3339(valid_from)) STORED,
  ADD COLUMN valid_to_rfc3339 text GENERATED ALWAYS AS (rfc3339(valid_to)) STORED,
  ADD COLUMN created_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(created_at)) STORED,
  ADD COLUMN updated_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(updated_at)) STORED,
  ADD COLUMN deleted_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(deleted_at)) STORED;

ALTER TABLE tags
  ADD COLUMN valid_from_rfc3339 text GENERATED ALWAYS AS (rfc3339(valid_from)) STORED,
  ADD COLUMN valid_to_rfc3339 text GENERATED ALWAYS AS (rfc3339(valid_to)) STORED,
  ADD COLUMN created_at_rfc3339 text GENERATED ALWAYS AS (rfc3339(created_at)) STORED;
