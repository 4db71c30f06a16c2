-- The installation the scan archive belongs to (shared/archive, docs/design.md "The scan
-- archive"): an id drawn once, when this database is created, and written into the archive's
-- manifest by its first run. A run refuses a directory whose manifest names another installation:
-- it would otherwise delete that archive's segments as strays (ARCHIVE_DIR pointed at the wrong
-- volume). A database restored from a backup keeps its id, and so its archive.
CREATE TABLE archive_installation (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  id uuid NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO archive_installation DEFAULT VALUES;
