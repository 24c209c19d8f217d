-- Receiving by pack.
--
-- A purchase may be received in packs ("5 boxes of 10 at 12.35 a box"):
-- the batch still counts base units, and its cost per base unit is the
-- pack's cost divided by its units, which needs 4 decimal places (a box of
-- 3 at 10.00 is 3.3333 a unit). The rounded unit cost times the units is
-- not always what was paid (15 × 3.3333 = 49.9995, not 50.00), so the
-- batch keeps what the received quantity cost in all, to the cent, and
-- the purchases report and the valuations at cost read that.
--
-- Costs with 2 decimals keep their value: numeric(14, 4) holds 1.50 as
-- 1.5000, and the service renders a cost with 2 places unless it has more.

ALTER TABLE batches
    ALTER COLUMN unit_cost TYPE numeric(14, 4),
    -- What the received quantity cost in all. Null for batches written
    -- before this migration or by bulk loaders: their cost has 2 decimals,
    -- so qty_received × unit_cost is that total exactly.
    ADD COLUMN received_total numeric(14, 2) CHECK (received_total >= 0),
    -- The pack the batch was received in (null: loose base units) and its
    -- units at the time (a pack's units may be edited later).
    ADD COLUMN pack_id uuid REFERENCES medicine_packs (id),
    ADD COLUMN pack_units integer NOT NULL DEFAULT 1,
    ADD CONSTRAINT batches_pack_has_units
        CHECK ((pack_id IS NULL AND pack_units = 1) OR (pack_id IS NOT NULL AND pack_units >= 2));

-- A sale line's cost and a write-off line's cost are a batch's unit cost.
ALTER TABLE sale_items ALTER COLUMN cost_at_sale TYPE numeric(14, 4);
ALTER TABLE write_off_items ALTER COLUMN unit_cost TYPE numeric(14, 4);

-- The purchases report sums the received totals.
DROP INDEX batches_purchases_report_idx;
CREATE INDEX batches_purchases_report_idx ON batches (created_at)
    INCLUDE (branch_id, supplier_id, medicine_id, qty_received, unit_cost, received_total)
    WHERE origin = 'purchase' AND NOT is_deleted;

-- What `qty` base units of a batch are worth at cost, to the cent: their
-- share of the received total, so that the whole batch is worth exactly
-- what it cost (for a 2-decimal cost this is qty × unit_cost). The same
-- rule as `stock::cost::value` in the service.
CREATE FUNCTION batch_value(qty integer, unit_cost numeric, received_total numeric,
                            qty_received integer)
    RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN received_total IS NOT NULL AND qty_received > 0
                THEN round(received_total * qty / qty_received, 2)
                ELSE round(qty * unit_cost, 2) END
$$;
