-- Location ids stop one short of 2147483647, so `id + 1` never overflows: a subtree is the range
-- [ancestors || id, ancestors || (id + 1)) of the btree on paths (read-model 201). The wire still
-- accepts 2147483647 as an id; no location ever has it.
ALTER SEQUENCE location_ids MAXVALUE 2147483646;
