-- `q` on GET /assets: case-insensitive substring (ILIKE) over name, external_key, description
-- and active, currently-effective tag values, each through a trigram index.
CREATE INDEX assets_name_trgm ON assets USING gin (name gin_trgm_ops);
CREATE INDEX assets_key_trgm ON assets USING gin (external_key gin_trgm_ops);
CREATE INDEX assets_description_trgm ON assets USING gin (description gin_trgm_ops);
CREATE INDEX tags_value_trgm ON tags USING gin (value gin_trgm_ops) WHERE deleted_at IS NULL;
