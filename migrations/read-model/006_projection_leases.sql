-- Segmented processors (docs/design.md "Segmented processors"): who applies each segment of a
-- projection, under a lease. `name` is the segment's checkpoint name (`<projection>` for a
-- projection of one segment, `<projection>#<i>/<n>` otherwise). `epoch` grows with every claim;
-- `backend_pid`: the holder's follower connection, so a claim need not wait out the lease of a
-- holder whose connection is gone (a killed process).
CREATE TABLE projection_leases (
  name text PRIMARY KEY,
  owner text NOT NULL,
  epoch bigint NOT NULL,
  backend_pid integer NOT NULL,
  expires_at timestamptz NOT NULL
);

-- The projector processes alive (renewed as their leases are): each keeps ceil(segments / members)
-- segments of a projection.
CREATE TABLE projector_members (
  owner text PRIMARY KEY,
  expires_at timestamptz NOT NULL
);

-- The fenced move: as move_projection_checkpoint (003), and first it locks the segment's lease row
-- and raises (SQLSTATE PC002) when the lease is no longer at `lease_epoch` (another process claimed
-- the segment): the COMMIT sent with it never runs, and the batch's writes roll back. The lock makes
-- a claim wait for this commit, so no batch commits under an epoch already replaced.
CREATE FUNCTION move_projection_checkpoint(projection text, from_position text, to_position text, channel text, payload text, lease_epoch bigint)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM 1 FROM projection_leases WHERE name = projection AND epoch = lease_epoch FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'lease of % is no longer at epoch %', projection, lease_epoch USING ERRCODE = 'PC002';
  END IF;
  UPDATE projection_checkpoints SET position = to_position, updated_at = now()
   WHERE name = projection AND position = from_position;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'checkpoint of % is no longer at %', projection, from_position USING ERRCODE = 'PC001';
  END IF;
  PERFORM pg_notify(channel, payload);
END
$$;
