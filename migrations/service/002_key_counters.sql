-- Next number of the auto-minted external_key (ASSET-NNNN, LOC-NNNN) per organization and
-- resource type. The minted key itself is in the event, so a replay never reads this table.
CREATE TABLE key_counters (
  org_id integer NOT NULL,
  resource text NOT NULL,
  next_value bigint NOT NULL,
  PRIMARY KEY (org_id, resource)
);
