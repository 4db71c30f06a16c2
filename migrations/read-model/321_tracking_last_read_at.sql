-- The observed time of a chunk's last read at or before an instant, for the report at an instant
-- (projections/tracking/queries.ts lastReadAtOrBeforeSql). tracking_chunk_reads decodes a whole
-- chunk into rows and the caller keeps their maximum; this walks the chunk's varints
-- (projections/tracking/read-chunks.ts) only as far as the instant, reads the time deltas alone
-- and steps over each read's log order and location without decoding them: a report at an
-- instant of 5,000 assets decodes a chunk for every asset whose reads run on past it. The varint
-- loop is tracking_chunk_reads' (320), written out again: a function call per varint would cost
-- more than the walk.
CREATE FUNCTION tracking_chunk_last_read_at(first_at timestamptz, data bytea, at timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  i integer := 0;
  n integer := length(data);
  -- The instant, in microseconds after the chunk's first read.
  until_us bigint := (extract(epoch FROM at - first_at) * 1000000)::bigint;
  us bigint := 0;
  last_us bigint;
  v bigint;
  scale bigint;
  b integer;
BEGIN
  WHILE i < n LOOP
    v := 0;
    scale := 1;
    LOOP
      b := get_byte(data, i);
      i := i + 1;
      v := v + (b & 127) * scale;
      EXIT WHEN b < 128;
      scale := scale * 128;
    END LOOP;
    us := us + v;
    EXIT WHEN us > until_us;
    last_us := us;
    -- The read's log order and location: two varints, skipped.
    LOOP
      b := get_byte(data, i);
      i := i + 1;
      EXIT WHEN b < 128;
    END LOOP;
    LOOP
      b := get_byte(data, i);
      i := i + 1;
      EXIT WHEN b < 128;
    END LOOP;
  END LOOP;
  IF last_us IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN first_at + make_interval(secs => last_us / 1000000) + make_interval(secs => (last_us % 1000000) / 1000000.0);
END $$;
