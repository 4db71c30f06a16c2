-- append_events, cheaper for a call of many streams (docs/design.md "Event store (Postgres
-- adapter)"): when every stream of the call has new events (an import's batch: hundreds of
-- streams), their revisions move in one statement instead of one statement per stream, and the
-- expectations are checked afterwards on what the rows were (a wrong one raises, and the whole
-- call rolls back, rows moved for the other streams included). The events' stream ids and first
-- revisions come from a join, not from subscripting a text array per event. A call with a stream
-- that has nothing new (an expectation check alone, or a partial repeat) keeps the per-stream
-- loop of 002. Same signature, same answers, same errors as 002.
CREATE OR REPLACE FUNCTION event_store.append_events(
  p_stream_ids text[],
  p_expected text[],
  p_counts int[],
  p_event_streams int[],
  p_offsets int[],
  p_event_ids uuid[],
  p_types text[],
  p_data jsonb[],
  p_metadata jsonb[],
  OUT revisions bigint[],
  OUT last_commit xid8,
  OUT last_prepare bigint
) LANGUAGE plpgsql AS $fn$
DECLARE
  stream_count int := cardinality(p_stream_ids);
  event_count int := cardinality(p_event_ids);
  existing uuid[] := '{}';
  fresh int[] := p_counts;
  first_revisions bigint[] := '{}';
  s int;
  n bigint;
  rev bigint;
  expectation text;
  exact bigint;
  holds boolean;
BEGIN
  IF event_count > 0 AND EXISTS (SELECT FROM event_store.events e WHERE e.event_id = ANY (p_event_ids)) THEN
    SELECT array_agg(e.event_id) INTO existing FROM event_store.events e WHERE e.event_id = ANY (p_event_ids);
    IF cardinality(existing) = event_count THEN
      -- The whole append happened before: the same answer, nothing written.
      SELECT array_agg(coalesce(es.revision, -1) ORDER BY u.ord) INTO revisions
      FROM unnest(p_stream_ids) WITH ORDINALITY AS u(id, ord)
      LEFT JOIN event_store.event_streams es ON es.stream_id = u.id;
      SELECT e.tx_id, e.global_position INTO last_commit, last_prepare
      FROM event_store.events e WHERE e.event_id = ANY (p_event_ids)
      ORDER BY e.tx_id DESC, e.global_position DESC LIMIT 1;
      RETURN;
    END IF;
    -- Partly a repeat: only the new events count.
    SELECT array_agg(coalesce(c.n, 0) ORDER BY g.s) INTO fresh
    FROM generate_series(1, stream_count) AS g(s)
    LEFT JOIN (
      SELECT u.si, count(*) AS n FROM unnest(p_event_streams, p_event_ids) AS u(si, id)
      WHERE u.id <> ALL (existing) GROUP BY u.si
    ) c ON c.si = g.s;
  END IF;

  IF cardinality(existing) = 0 AND stream_count > 0 AND 0 < ALL (fresh) THEN
    -- Every stream has new events: one upsert moves them all, locking the rows in the order
    -- given (the callers' sorted order, so concurrent appends cannot deadlock). A stream that
    -- did not exist gets revision n - 1; one that did, its revision + n. What it was before is
    -- then the new revision - n (-1: no stream), checked against each expectation below.
    WITH moved AS (
      INSERT INTO event_store.event_streams AS es (stream_id, revision)
      SELECT u.id, u.n - 1 FROM unnest(p_stream_ids, fresh) WITH ORDINALITY AS u(id, n, ord) ORDER BY u.ord
      ON CONFLICT (stream_id) DO UPDATE SET revision = es.revision + excluded.revision + 1
      RETURNING es.stream_id, es.revision
    )
    SELECT array_agg(m.revision ORDER BY u.ord) INTO revisions
    FROM unnest(p_stream_ids) WITH ORDINALITY AS u(id, ord) JOIN moved m ON m.stream_id = u.id;

    -- The first stream whose expectation did not hold (its revision before, -1 for none).
    SELECT c.ord, c.rev - c.n INTO s, rev
    FROM unnest(p_expected, fresh, revisions) WITH ORDINALITY AS c(expectation, n, rev, ord)
    WHERE NOT CASE
      WHEN c.expectation = 'any' THEN true
      WHEN c.expectation = 'no_stream' THEN c.rev - c.n = -1
      WHEN c.expectation = 'stream_exists' THEN c.rev - c.n >= 0
      ELSE c.rev - c.n = c.expectation::bigint
    END
    ORDER BY c.ord LIMIT 1;
    IF s IS NOT NULL THEN
      RAISE EXCEPTION 'wrong expected revision on stream %', p_stream_ids[s]
        USING ERRCODE = 'YE409', DETAIL = s || ' ' || rev;
    END IF;

    -- Global positions are taken row by row in the order given.
    INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data, metadata)
    SELECT u.id, st.id, st.rev - st.n + 1 + u.k, u.t, u.d, u.m
    FROM unnest(p_event_streams, p_offsets, p_event_ids, p_types, p_data, p_metadata) WITH ORDINALITY AS u(si, k, id, t, d, m, ord)
    JOIN unnest(p_stream_ids, revisions, fresh) WITH ORDINALITY AS st(id, rev, n, ord) ON st.ord = u.si
    ORDER BY u.ord;
    last_commit := pg_current_xact_id();
    last_prepare := currval('event_store.events_global_position_seq'::regclass);
    RETURN;
  END IF;

  FOR s IN 1..stream_count LOOP
    expectation := p_expected[s];
    -- (An IF, not a CASE: the planner may fold a constant cast in any branch of a CASE.)
    IF expectation IN ('any', 'no_stream', 'stream_exists') THEN
      exact := NULL;
    ELSE
      exact := expectation::bigint;
    END IF;
    n := fresh[s];
    rev := NULL;
    IF n = 0 THEN
      -- No new event for this stream: either a pure expectation check (the row is held until we
      -- commit), or a stream whose events are all repeats (no check, as for a full repeat).
      SELECT es.revision INTO rev FROM event_store.event_streams es WHERE es.stream_id = p_stream_ids[s] FOR SHARE;
      holds := CASE expectation
        WHEN 'any' THEN true
        WHEN 'no_stream' THEN rev IS NULL
        WHEN 'stream_exists' THEN rev IS NOT NULL
        ELSE rev IS NOT DISTINCT FROM exact
      END;
      IF p_counts[s] = 0 AND NOT holds THEN
        RAISE EXCEPTION 'wrong expected revision on stream %', p_stream_ids[s]
          USING ERRCODE = 'YE409', DETAIL = s || ' ' || coalesce(rev, -1);
      END IF;
      revisions[s] := coalesce(rev, -1);
      first_revisions[s] := 0;
      CONTINUE;
    END IF;

    IF expectation = 'any' THEN
      INSERT INTO event_store.event_streams AS es (stream_id, revision) VALUES (p_stream_ids[s], n - 1)
      ON CONFLICT (stream_id) DO UPDATE SET revision = es.revision + n
      RETURNING es.revision INTO rev;
    ELSIF expectation = 'no_stream' THEN
      INSERT INTO event_store.event_streams AS es (stream_id, revision) VALUES (p_stream_ids[s], n - 1)
      ON CONFLICT (stream_id) DO NOTHING
      RETURNING es.revision INTO rev;
    ELSIF expectation = 'stream_exists' THEN
      UPDATE event_store.event_streams es SET revision = es.revision + n
      WHERE es.stream_id = p_stream_ids[s]
      RETURNING es.revision INTO rev;
    ELSE
      UPDATE event_store.event_streams es SET revision = es.revision + n
      WHERE es.stream_id = p_stream_ids[s] AND es.revision = exact
      RETURNING es.revision INTO rev;
    END IF;
    IF rev IS NULL THEN
      SELECT es.revision INTO rev FROM event_store.event_streams es WHERE es.stream_id = p_stream_ids[s];
      RAISE EXCEPTION 'wrong expected revision on stream %', p_stream_ids[s]
        USING ERRCODE = 'YE409', DETAIL = s || ' ' || coalesce(rev, -1);
    END IF;
    revisions[s] := rev;
    first_revisions[s] := rev - n + 1;
  END LOOP;

  IF cardinality(existing) = event_count THEN
    -- Expectation checks only: answer with the head of the log.
    SELECT e.tx_id, e.global_position INTO last_commit, last_prepare
    FROM event_store.events e WHERE e.tx_id < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY e.tx_id DESC, e.global_position DESC LIMIT 1;
    RETURN;
  END IF;

  -- Global positions are taken row by row in the order given.
  IF cardinality(existing) = 0 THEN
    INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data, metadata)
    SELECT u.id, p_stream_ids[u.si], first_revisions[u.si] + u.k, u.t, u.d, u.m
    FROM unnest(p_event_streams, p_offsets, p_event_ids, p_types, p_data, p_metadata) AS u(si, k, id, t, d, m);
  ELSE
    INSERT INTO event_store.events (event_id, stream_id, stream_revision, type, data, metadata)
    SELECT u.id, p_stream_ids[u.si],
           first_revisions[u.si] + row_number() OVER (PARTITION BY u.si ORDER BY u.ord) - 1,
           u.t, u.d, u.m
    FROM unnest(p_event_streams, p_event_ids, p_types, p_data, p_metadata) WITH ORDINALITY AS u(si, id, t, d, m, ord)
    WHERE u.id <> ALL (existing)
    ORDER BY u.ord;
  END IF;
  last_commit := pg_current_xact_id();
  -- The last value this session took from the sequence: the last row inserted.
  last_prepare := currval('event_store.events_global_position_seq'::regclass);
END
$fn$;
