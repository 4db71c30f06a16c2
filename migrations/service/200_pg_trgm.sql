-- Trigram indexes serve the `q` substring search of the master-data lists. The extension is
-- database-wide; it lives in `public` so every read-model schema (live, rebuild, replay) resolves
-- its operator classes through the migrations' search_path. pg_trgm is a trusted extension:
-- the database owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
