-- Supplier invoices matched three ways: each invoice line bills a goods
-- received line, for at most what that line received less what other
-- invoices billed; the invoice total equals its lines and charges; a
-- price beyond the tolerance, or a quantity billed before it was
-- received, holds the invoice until a manager releases it.
--
-- Invariants enforced here, whatever the number of server processes:
--   * a receipt line never bills more than it received: the invoice raises
--     `goods_received_lines.quantity_invoiced` by a conditional update in
--     its own transaction, and the CHECK of migration 0025 backs it;
--   * an invoice on hold is never paid: a payment's conditional update
--     requires `match_status <> 'on_hold'`;
--   * a released invoice names who released it, when and why (CHECK).

ALTER TABLE supplier_invoices
    ADD COLUMN match_status text NOT NULL DEFAULT 'unmatched'
        CHECK (match_status IN ('unmatched', 'matched', 'on_hold', 'released')),
    ADD COLUMN charges_total numeric(14, 2) NOT NULL DEFAULT 0 CHECK (charges_total >= 0),
    ADD COLUMN released_by uuid REFERENCES users (id),
    ADD COLUMN released_at timestamptz,
    ADD COLUMN release_reason text CHECK (char_length(release_reason) BETWEEN 1 AND 1000),
    ADD CONSTRAINT supplier_invoices_release_consistent CHECK (
        (match_status = 'released') = (released_at IS NOT NULL)
        AND (released_at IS NULL) = (released_by IS NULL)
        AND (released_at IS NULL) = (release_reason IS NULL)
    );

-- Quantities and costs in the units the receipt line was received in
-- (packs when it was received by pack); `base_quantity` in base units.
CREATE TABLE supplier_invoice_lines (
    id                      uuid PRIMARY KEY,
    invoice_id              uuid NOT NULL REFERENCES supplier_invoices (id),
    line_no                 integer NOT NULL CHECK (line_no > 0),
    goods_received_line_id  uuid NOT NULL REFERENCES goods_received_lines (id),
    quantity                integer NOT NULL CHECK (quantity > 0),
    base_quantity           integer NOT NULL CHECK (base_quantity >= quantity),
    unit_cost               numeric(14, 2) NOT NULL CHECK (unit_cost >= 0),
    line_total              numeric(14, 2) NOT NULL CHECK (line_total >= 0),
    -- The receipt's price per unit as received, when billed.
    received_unit_cost      numeric(14, 4) NOT NULL CHECK (received_unit_cost >= 0),
    -- Whether the note was posted (the goods received) when billed.
    received                boolean NOT NULL,
    -- Why this line holds the invoice (null: it does not).
    hold_reason             text CHECK (char_length(hold_reason) BETWEEN 1 AND 500),
    UNIQUE (invoice_id, line_no)
);
CREATE INDEX supplier_invoice_lines_invoice_idx ON supplier_invoice_lines (invoice_id, line_no);
CREATE INDEX supplier_invoice_lines_receipt_idx ON supplier_invoice_lines (goods_received_line_id);

CREATE TABLE supplier_invoice_charges (
    id          uuid PRIMARY KEY,
    invoice_id  uuid NOT NULL REFERENCES supplier_invoices (id),
    line_no     integer NOT NULL CHECK (line_no > 0),
    kind        text NOT NULL CHECK (kind IN ('freight', 'insurance', 'clearing', 'other')),
    amount      numeric(14, 2) NOT NULL CHECK (amount > 0),
    UNIQUE (invoice_id, line_no)
);
