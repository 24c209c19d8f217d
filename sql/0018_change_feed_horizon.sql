-- The change feed's horizon without a lock (domain/src/sync/horizon.rs).
--
-- Readers no longer take the change-log lock exclusively, and writers no
-- longer take it at all. Instead a rev is only ever drawn by a transaction
-- that already has a transaction id, so a reader can tell when every rev up
-- to a value is final: once every transaction older than an id drawn after
-- that value has ended (pg_snapshot_xmin of a later snapshot).

-- The transaction that wrote each change (NULL for rows written before
-- this migration; all of them are long final). Lets the snapshot find the
-- changes its MVCC snapshot could not see.
ALTER TABLE change_log ADD COLUMN xid xid8;
ALTER TABLE change_log ALTER COLUMN xid SET DEFAULT pg_current_xact_id();

-- The one way to draw a rev: the transaction id first, then the rev.
CREATE FUNCTION change_log_next_rev() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval('change_log_rev_seq');
END
$$;

ALTER TABLE change_log ALTER COLUMN rev SET DEFAULT change_log_next_rev();
