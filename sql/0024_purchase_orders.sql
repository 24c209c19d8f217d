-- Purchase orders: what a branch asks a supplier for, approved by a manager
-- before it is sent, and received against (partly, with rejects) by goods
-- received notes.
--
-- Invariants enforced here, whatever the number of server processes:
--   * `po_number` is unique per branch (`<BRANCH CODE>-PO-<6 digits>`): the
--     branch's counter row is bumped in the order's own transaction;
--   * a line never receives more than it ordered unless an over-receipt was
--     allowed on the note that received it (`over_received` then records
--     it), and never bills more than it received (CHECKs; the goods
--     received notes and supplier invoices raise these columns by
--     conditional updates under the line's row lock);
--   * the order's status is one of the states of the docs.

CREATE TABLE purchase_order_counters (
    branch_id  uuid PRIMARY KEY REFERENCES branches (id),
    last_seq   bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
);

CREATE TABLE purchase_orders (
    id             uuid PRIMARY KEY,
    branch_id      uuid NOT NULL REFERENCES branches (id),
    supplier_id    uuid NOT NULL REFERENCES suppliers (id),
    seq            bigint NOT NULL CHECK (seq > 0),
    po_number      text NOT NULL CHECK (char_length(po_number) BETWEEN 1 AND 100),
    status         text NOT NULL DEFAULT 'draft'
                   CHECK (status IN ('draft', 'submitted', 'approved', 'sent',
                                     'partially_received', 'received', 'closed', 'cancelled')),
    expected_date  date,
    notes          text NOT NULL DEFAULT '' CHECK (char_length(notes) <= 2000),
    total          numeric(14, 2) NOT NULL DEFAULT 0 CHECK (total >= 0),
    created_by     uuid NOT NULL REFERENCES users (id),
    submitted_by   uuid REFERENCES users (id),
    approved_by    uuid REFERENCES users (id),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (branch_id, seq),
    UNIQUE (branch_id, po_number)
);
CREATE INDEX purchase_orders_newest_idx ON purchase_orders (created_at DESC, id DESC);
CREATE INDEX purchase_orders_branch_idx ON purchase_orders (branch_id, created_at DESC, id DESC);
CREATE INDEX purchase_orders_supplier_idx ON purchase_orders (supplier_id, branch_id, status);

-- Quantities count base units; `pack_id`/`pack_units` say how the line was
-- ordered (a line of 5 boxes of 10 orders 50 base units).
CREATE TABLE purchase_order_lines (
    id                 uuid PRIMARY KEY,
    purchase_order_id  uuid NOT NULL REFERENCES purchase_orders (id),
    line_no            integer NOT NULL CHECK (line_no > 0),
    medicine_id        uuid NOT NULL REFERENCES medicines (id),
    pack_id            uuid REFERENCES medicine_packs (id),
    pack_units         integer NOT NULL DEFAULT 1 CHECK (pack_units >= 1),
    quantity_ordered   integer NOT NULL CHECK (quantity_ordered > 0),
    quantity_received  integer NOT NULL DEFAULT 0 CHECK (quantity_received >= 0),
    quantity_rejected  integer NOT NULL DEFAULT 0 CHECK (quantity_rejected >= 0),
    quantity_invoiced  integer NOT NULL DEFAULT 0 CHECK (quantity_invoiced >= 0),
    -- Raised when a note posted with `allow_over_receipt` received more
    -- than was outstanding; the CHECK below reads it.
    over_received      boolean NOT NULL DEFAULT false,
    -- Per ordered unit (per pack when `pack_id` is set), as the buyer typed it.
    unit_cost          numeric(14, 4) NOT NULL CHECK (unit_cost >= 0),
    line_total         numeric(14, 2) NOT NULL CHECK (line_total >= 0),
    UNIQUE (purchase_order_id, line_no),
    CONSTRAINT purchase_order_lines_whole_packs
        CHECK (quantity_ordered % pack_units = 0),
    CONSTRAINT purchase_order_lines_received_within_ordered
        CHECK (over_received OR quantity_received <= quantity_ordered),
    CONSTRAINT purchase_order_lines_invoiced_within_received
        CHECK (quantity_invoiced <= quantity_received)
);
CREATE INDEX purchase_order_lines_order_idx ON purchase_order_lines (purchase_order_id, line_no);

-- The settings the buying rules read (organisation-wide, read and written
-- through `/settings` like the others).
ALTER TABLE settings
    ADD COLUMN min_shelf_life_days integer NOT NULL DEFAULT 90
        CHECK (min_shelf_life_days BETWEEN 0 AND 3650),
    ADD COLUMN invoice_price_tolerance_percent numeric(5, 2) NOT NULL DEFAULT 2
        CHECK (invoice_price_tolerance_percent BETWEEN 0 AND 100);
