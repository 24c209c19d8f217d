-- Supplier returns and their debit notes: stock sent back to the supplier
-- it came from (expired, damaged, recalled, the wrong item), valued at
-- batch cost, and the debit note that settles the supplier's invoices.
--
-- Invariants enforced here, whatever the number of server processes:
--   * `seq` is gapless and unique per branch: the branch's counter row is
--     bumped in the return's own transaction (a rolled-back return gives
--     its number back) and UNIQUE (branch_id, seq) backs it; the number is
--     `<BRANCH CODE>-DN-<seq, 8 digits>`;
--   * a debit note never settles more than it is worth: `used_value` is
--     raised by a conditional update under the note's row lock in the
--     payment's transaction, and a CHECK keeps it within `total_value`;
--   * a settlement pays an invoice of the note's own supplier and branch
--     (composite foreign keys), and one payment uses one note;
--   * a returned line takes at least one unit of a batch of the medicine
--     it names (CHECK, foreign key); the stock itself leaves through the
--     ledger's conditional update (`RETURN_TO_SUPPLIER` movements), so a
--     batch never goes below zero.

ALTER TABLE stock_movements DROP CONSTRAINT IF EXISTS stock_movements_kind_check;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_kind_check
    CHECK (kind IN ('IN', 'SALE', 'SALE_REVERSAL', 'ADJUST', 'TRANSFER_OUT', 'TRANSFER_IN',
                    'TRANSFER_CANCEL', 'RETURN', 'WRITE_OFF', 'RETURN_TO_SUPPLIER'));

-- One row per branch: the last debit note's seq.
CREATE TABLE debit_note_counters (
    branch_id  uuid PRIMARY KEY REFERENCES branches (id),
    last_seq   bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
);

CREATE TABLE supplier_returns (
    id                 uuid PRIMARY KEY,
    branch_id          uuid NOT NULL REFERENCES branches (id),
    supplier_id        uuid NOT NULL REFERENCES suppliers (id),
    seq                bigint NOT NULL CHECK (seq > 0),
    debit_note_number  text NOT NULL CHECK (char_length(debit_note_number) BETWEEN 1 AND 100),
    reason             text NOT NULL
                       CHECK (reason IN ('expired', 'damaged', 'recalled', 'wrong_item', 'other')),
    notes              text NOT NULL DEFAULT '' CHECK (char_length(notes) <= 2000),
    -- Σ lines' value at batch cost.
    total_value        numeric(14, 2) NOT NULL CHECK (total_value >= 0),
    -- What payments have settled with this note so far.
    used_value         numeric(14, 2) NOT NULL DEFAULT 0 CHECK (used_value >= 0),
    created_by         uuid NOT NULL REFERENCES users (id),
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT supplier_returns_used_within_total CHECK (used_value <= total_value),
    UNIQUE (branch_id, seq),
    UNIQUE (branch_id, debit_note_number),
    -- The settlements' composite key (same supplier, same branch).
    UNIQUE (id, supplier_id, branch_id)
);
CREATE INDEX supplier_returns_newest_idx ON supplier_returns (created_at DESC, id DESC);
CREATE INDEX supplier_returns_branch_idx ON supplier_returns (branch_id, created_at DESC, id DESC);
CREATE INDEX supplier_returns_supplier_idx ON supplier_returns (supplier_id, created_at DESC, id DESC);

-- One line per batch returned. `is_controlled` and `control_schedule` are
-- the medicine's when it was returned: the controlled lines form the
-- register of supplier returns of controlled medicines.
CREATE TABLE supplier_return_items (
    id                  uuid PRIMARY KEY,
    supplier_return_id  uuid NOT NULL REFERENCES supplier_returns (id),
    line_no             integer NOT NULL CHECK (line_no >= 0),
    batch_id            uuid NOT NULL,
    medicine_id         uuid NOT NULL,
    quantity            integer NOT NULL CHECK (quantity > 0),
    -- The batch's cost per base unit.
    unit_cost           numeric(14, 4) NOT NULL CHECK (unit_cost >= 0),
    -- The units' share of what the batch cost (`batch_value`), to the cent.
    value               numeric(14, 2) NOT NULL CHECK (value >= 0),
    is_controlled       boolean NOT NULL,
    control_schedule    text NOT NULL DEFAULT '' CHECK (char_length(control_schedule) <= 50),
    UNIQUE (supplier_return_id, line_no),
    UNIQUE (supplier_return_id, batch_id),
    FOREIGN KEY (batch_id, medicine_id) REFERENCES batches (id, medicine_id)
);
CREATE INDEX supplier_return_items_return_idx ON supplier_return_items (supplier_return_id, line_no);
CREATE INDEX supplier_return_items_controlled_idx ON supplier_return_items (supplier_return_id)
    WHERE is_controlled;

-- What each debit-note payment took from its note.
ALTER TABLE supplier_invoices ADD CONSTRAINT supplier_invoices_id_supplier_branch_key
    UNIQUE (id, supplier_id, branch_id);

CREATE TABLE debit_note_settlements (
    id                  uuid PRIMARY KEY,
    supplier_return_id  uuid NOT NULL,
    invoice_id          uuid NOT NULL,
    payment_id          uuid NOT NULL UNIQUE REFERENCES supplier_payments (id),
    supplier_id         uuid NOT NULL,
    branch_id           uuid NOT NULL,
    amount              numeric(14, 2) NOT NULL CHECK (amount > 0),
    created_at          timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (supplier_return_id, supplier_id, branch_id)
        REFERENCES supplier_returns (id, supplier_id, branch_id),
    FOREIGN KEY (invoice_id, supplier_id, branch_id)
        REFERENCES supplier_invoices (id, supplier_id, branch_id)
);
CREATE INDEX debit_note_settlements_note_idx ON debit_note_settlements (supplier_return_id);
