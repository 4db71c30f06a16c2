-- Surrogate ids: unique per entity type, 1..2147483647, never reused (a sequence never hands a
-- value out twice, even when the transaction that took it rolls back).
CREATE SEQUENCE asset_ids AS integer MINVALUE 1 MAXVALUE 2147483647 NO CYCLE;
CREATE SEQUENCE location_ids AS integer MINVALUE 1 MAXVALUE 2147483647 NO CYCLE;
CREATE SEQUENCE tag_ids AS integer MINVALUE 1 MAXVALUE 2147483647 NO CYCLE;
CREATE SEQUENCE org_ids AS integer MINVALUE 1 MAXVALUE 2147483647 NO CYCLE;
