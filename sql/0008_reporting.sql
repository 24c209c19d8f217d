-- Reporting: what keeps the dashboard and the reports fast on a year of
-- sales (1,000,000 sale lines, 20 branches; see "Reports performance" in
-- README.md). Each report reads its window from one index, most of them
-- from the index alone (index-only scans).

-- Sale lines carry their sale's branch and time, so line-level reports (top
-- sellers, VAT by month) range-scan the lines of a window instead of joining
-- every sale of the window to its lines. The database keeps the copy right:
-- a line takes both from its sale on every write, and a sale that moves
-- (branch or time) moves its lines.
ALTER TABLE sale_items ADD COLUMN branch_id uuid REFERENCES branches (id);
ALTER TABLE sale_items ADD COLUMN sold_at timestamptz;
UPDATE sale_items i SET branch_id = s.branch_id, sold_at = s.created_at FROM sales s WHERE s.id = i.sale_id;
ALTER TABLE sale_items ALTER COLUMN branch_id SET NOT NULL;
ALTER TABLE sale_items ALTER COLUMN sold_at SET NOT NULL;

CREATE FUNCTION sale_items_copy_sale() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    SELECT s.branch_id, s.created_at INTO NEW.branch_id, NEW.sold_at
    FROM sales s WHERE s.id = NEW.sale_id;
    RETURN NEW;
END $$;
CREATE TRIGGER sale_items_copy_sale BEFORE INSERT OR UPDATE ON sale_items
    FOR EACH ROW EXECUTE FUNCTION sale_items_copy_sale();

CREATE FUNCTION sales_move_items() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sale_items SET branch_id = NEW.branch_id, sold_at = NEW.created_at WHERE sale_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER sales_move_items AFTER UPDATE OF branch_id, created_at ON sales
    FOR EACH ROW WHEN (OLD.branch_id IS DISTINCT FROM NEW.branch_id OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION sales_move_items();

-- Lines of a window (top selling with gross profit, VAT by rate and month).
CREATE INDEX sale_items_sold_idx ON sale_items (sold_at)
    INCLUDE (branch_id, medicine_id, quantity, line_total, vat_amount, vat_rate, cost_at_sale);

-- Sales of a window (totals, by day, by payment, by pharmacist, branch
-- comparison, the dashboard's days): range on created_at, branch as a
-- filter, and the figures the aggregates need.
CREATE INDEX sales_report_idx ON sales (created_at)
    INCLUDE (branch_id, total, vat, subtotal, payment_method, created_by);

-- Stock per medicine across the chain or at one branch (dashboard stock
-- counts, inventory report, low-stock list). Only batches that still hold
-- stock: most batches of a year are long sold out.
CREATE INDEX batches_stock_report_idx ON batches (medicine_id)
    INCLUDE (branch_id, qty_remaining) WHERE qty_remaining > 0 AND NOT is_deleted;

-- Batches that still hold stock, by expiry (expiring and expired counts).
CREATE INDEX batches_expiry_report_idx ON batches (expiry_date)
    INCLUDE (branch_id, regulator_status) WHERE qty_remaining > 0 AND NOT is_deleted;

-- Purchases received in a window (the purchases report).
CREATE INDEX batches_purchases_report_idx ON batches (created_at)
    INCLUDE (branch_id, supplier_id, medicine_id, qty_received, unit_cost)
    WHERE origin = 'purchase' AND NOT is_deleted;

-- A branch's stock ledger summed per medicine (inventory with branch_id).
CREATE INDEX stock_movements_ledger_idx ON stock_movements (branch_id, medicine_id) INCLUDE (qty);
