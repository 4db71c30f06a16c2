-- Count ids (docs/api.md "Counts"): unique, 1..2147483647, never reused, as every surrogate id.
CREATE SEQUENCE count_ids AS integer MINVALUE 1 MAXVALUE 2147483647 NO CYCLE;
