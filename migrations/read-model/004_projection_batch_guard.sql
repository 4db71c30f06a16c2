-- Opens a projection batch: locks the projection's checkpoint row before the batch writes
-- anything, and raises (SQLSTATE PC001, as move_projection_checkpoint) when the checkpoint is no
-- longer at `from_position`. A rebuild's swap locks the same row first: a live batch then waits
-- here, before it holds any table lock (so the swap's table locks cannot deadlock with it), and
-- once the swap has moved the checkpoint it stops here without writing.
CREATE FUNCTION begin_projection_batch(projection text, from_position text)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM 1 FROM projection_checkpoints WHERE name = projection AND position = from_position FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'checkpoint of % is no longer at %', projection, from_position USING ERRCODE = 'PC001';
  END IF;
END
$$;
