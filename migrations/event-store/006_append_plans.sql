-- append_events keeps the plans of its statements for the life of a connection (PL/pgSQL caches
-- them). On a fresh database, before the first ANALYZE of event_store.events, the duplicate-event-id
-- check (`event_id = ANY (...)`) was planned as a sequential scan of an empty table, and that plan
-- stayed while the table grew: appends slowed down in proportion to the log until autovacuum's
-- ANALYZE replaced it (docs/design.md "Event store (Postgres adapter)"). Every statement of the
-- function reaches rows by a key it has an index for (an event id, a stream id), so no plan of it
-- needs a sequential scan at any size: the function plans with them off, from its first call.
ALTER FUNCTION event_store.append_events(text[], text[], int[], int[], int[], uuid[], text[], jsonb[], jsonb[]) SET enable_seqscan = off;
