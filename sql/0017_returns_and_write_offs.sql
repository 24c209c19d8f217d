-- Returns with credit notes, and stock write-offs with the destruction
-- register.
--
-- Invariants enforced here, whatever the number of server processes:
--   * a sale line never has more units returned than it sold: its
--     `returned_quantity` (what issued and pending returns hold) is raised
--     by a conditional update under the line's row lock, and a CHECK keeps
--     it within `quantity`;
--   * `cn_seq` is gapless and unique per branch: the counter row is bumped
--     in the credit note's own transaction and UNIQUE (branch_id, cn_seq)
--     backs it; credit notes are hash-chained per branch like invoices;
--   * an issued credit note carries its number, hash, time and issuer, a
--     pending or rejected return none of them (CHECKs);
--   * one return per client mutation id (per branch for REST, per device
--     for a till), and one return per approval (unique indexes);
--   * a controlled line written off names its witness (CHECK);
--   * a credit refund lowers a balance only as far as zero (the existing
--     CHECK on customers.current_balance and customer_ledger.balance_after).

-- New kinds of stock movement and ledger row.
ALTER TABLE stock_movements DROP CONSTRAINT IF EXISTS stock_movements_kind_check;
ALTER TABLE stock_movements ADD CONSTRAINT stock_movements_kind_check
    CHECK (kind IN ('IN', 'SALE', 'SALE_REVERSAL', 'ADJUST', 'TRANSFER_OUT', 'TRANSFER_IN',
                    'TRANSFER_CANCEL', 'RETURN', 'WRITE_OFF'));

ALTER TABLE customer_ledger DROP CONSTRAINT IF EXISTS customer_ledger_transaction_type_check;
ALTER TABLE customer_ledger ADD CONSTRAINT customer_ledger_transaction_type_check
    CHECK (transaction_type IN ('OPENING', 'SALE', 'PAYMENT', 'REFUND'));

-- What issued and pending returns hold of each sale line.
ALTER TABLE sale_items ADD COLUMN returned_quantity integer NOT NULL DEFAULT 0;
ALTER TABLE sale_items ADD CONSTRAINT sale_items_returned_within_sold
    CHECK (returned_quantity >= 0 AND returned_quantity <= quantity);
-- The lines that have returns (the invariant check reads them alone).
CREATE INDEX sale_items_returned_idx ON sale_items (id) WHERE returned_quantity > 0;

-- One row per branch: the last cn_seq issued and the hash of that credit note.
CREATE TABLE credit_note_counters (
    branch_id    uuid PRIMARY KEY REFERENCES branches (id),
    last_cn_seq  bigint NOT NULL DEFAULT 0 CHECK (last_cn_seq >= 0),
    last_hash    text NOT NULL CHECK (char_length(last_hash) = 64)
);

-- A return of (part of) a sale. `pending_approval` until a manager decides
-- a cashier's return; `issued` once it is a credit note; `rejected` when
-- the manager refused it (nothing changed then).
CREATE TABLE sale_returns (
    id                  uuid PRIMARY KEY,
    sale_id             uuid NOT NULL REFERENCES sales (id),
    branch_id           uuid NOT NULL REFERENCES branches (id),
    status              text NOT NULL CHECK (status IN ('pending_approval', 'issued', 'rejected')),
    refund_method       text NOT NULL CHECK (refund_method IN ('cash', 'card', 'mobile_money', 'credit')),
    restock             boolean NOT NULL,
    reason              text NOT NULL CHECK (char_length(reason) BETWEEN 1 AND 2000),
    customer_id         uuid REFERENCES customers (id),
    subtotal            numeric(14, 2) NOT NULL,
    vat                 numeric(14, 2) NOT NULL CHECK (vat >= 0),
    total               numeric(14, 2) NOT NULL CHECK (total >= 0),
    approval_id         uuid REFERENCES approvals (id),
    cn_seq              bigint CHECK (cn_seq > 0),
    credit_note_number  text CHECK (char_length(credit_note_number) BETWEEN 1 AND 100),
    previous_hash       text CHECK (char_length(previous_hash) = 64),
    credit_note_hash    text CHECK (char_length(credit_note_hash) = 64),
    cash_session_id     uuid REFERENCES cash_sessions (id),
    device_id           uuid REFERENCES devices (id),
    client_mutation_id  text CHECK (char_length(client_mutation_id) BETWEEN 1 AND 200),
    request_digest      text CHECK (char_length(request_digest) <= 200),
    created_by          uuid NOT NULL REFERENCES users (id),
    issued_by           uuid REFERENCES users (id),
    rev                 bigint NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    issued_at           timestamptz,
    decided_at          timestamptz,
    UNIQUE (branch_id, cn_seq),
    UNIQUE (branch_id, credit_note_number),
    CONSTRAINT sale_returns_issued_consistent CHECK (
        (status = 'issued') = (cn_seq IS NOT NULL)
        AND (status = 'issued') = (credit_note_number IS NOT NULL)
        AND (status = 'issued') = (credit_note_hash IS NOT NULL)
        AND (status = 'issued') = (previous_hash IS NOT NULL)
        AND (status = 'issued') = (issued_at IS NOT NULL)
        AND (status = 'issued') = (issued_by IS NOT NULL)),
    -- A rejected return was decided; an approved one carries when.
    CONSTRAINT sale_returns_decided_consistent CHECK (
        (status <> 'rejected' OR approval_id IS NOT NULL)
        AND (decided_at IS NOT NULL) = (status = 'rejected' OR (status = 'issued' AND approval_id IS NOT NULL))),
    CONSTRAINT sale_returns_credit_has_customer CHECK (refund_method <> 'credit' OR customer_id IS NOT NULL)
);
CREATE INDEX sale_returns_sale_idx ON sale_returns (sale_id, created_at, id);
CREATE INDEX sale_returns_branch_idx ON sale_returns (branch_id, created_at DESC, id DESC);
CREATE INDEX sale_returns_created_idx ON sale_returns (created_at DESC, id DESC);
-- Credit notes of a window (reports, dashboard, VAT).
CREATE INDEX sale_returns_issued_idx ON sale_returns (issued_at)
    INCLUDE (branch_id, total, vat, subtotal, refund_method, created_by)
    WHERE status = 'issued';
CREATE UNIQUE INDEX sale_returns_branch_mutation_key ON sale_returns (branch_id, client_mutation_id)
    WHERE device_id IS NULL AND client_mutation_id IS NOT NULL;
CREATE UNIQUE INDEX sale_returns_device_mutation_key ON sale_returns (device_id, client_mutation_id)
    WHERE device_id IS NOT NULL AND client_mutation_id IS NOT NULL;
CREATE UNIQUE INDEX sale_returns_approval_key ON sale_returns (approval_id) WHERE approval_id IS NOT NULL;

-- One row per sale line returned (a sale line is one batch of one medicine).
CREATE TABLE sale_return_items (
    id             uuid PRIMARY KEY,
    return_id      uuid NOT NULL REFERENCES sale_returns (id),
    line_no        integer NOT NULL,
    sale_item_id   uuid NOT NULL REFERENCES sale_items (id),
    medicine_id    uuid NOT NULL,
    batch_id       uuid NOT NULL,
    quantity       integer NOT NULL CHECK (quantity > 0),
    unit_price     numeric(14, 2) NOT NULL CHECK (unit_price >= 0),
    vat_rate       numeric(6, 4) NOT NULL CHECK (vat_rate BETWEEN 0 AND 1),
    vat_amount     numeric(14, 2) NOT NULL CHECK (vat_amount >= 0),
    line_total     numeric(14, 2) NOT NULL CHECK (line_total >= 0),
    restocked      boolean NOT NULL,
    UNIQUE (return_id, sale_item_id),
    FOREIGN KEY (batch_id, medicine_id) REFERENCES batches (id, medicine_id)
);
CREATE INDEX sale_return_items_return_idx ON sale_return_items (return_id, line_no);
CREATE INDEX sale_return_items_line_idx ON sale_return_items (sale_item_id);

-- A controlled medicine returned writes a register row with a negative
-- quantity that names the credit note.
ALTER TABLE controlled_dispenses DROP CONSTRAINT IF EXISTS controlled_dispenses_quantity_check;
ALTER TABLE controlled_dispenses ADD COLUMN credit_note_id uuid REFERENCES sale_returns (id);
ALTER TABLE controlled_dispenses ADD CONSTRAINT controlled_dispenses_quantity_sign
    CHECK (quantity <> 0 AND (quantity < 0) = (credit_note_id IS NOT NULL));

-- The open cash session counts refunds; `expected_cash` falls by cash refunds.
ALTER TABLE cash_sessions
    ADD COLUMN total_refunds numeric(14, 2) NOT NULL DEFAULT 0 CHECK (total_refunds >= 0),
    ADD COLUMN refund_count integer NOT NULL DEFAULT 0 CHECK (refund_count >= 0),
    ADD COLUMN refund_breakdown jsonb NOT NULL DEFAULT '{}';

-- Stock written off (expired, damaged, recalled, lost, other).
CREATE TABLE write_offs (
    id            uuid PRIMARY KEY,
    branch_id     uuid NOT NULL REFERENCES branches (id),
    reason        text NOT NULL CHECK (reason IN ('expired', 'damaged', 'recalled', 'lost', 'other')),
    notes         text NOT NULL DEFAULT '' CHECK (char_length(notes) <= 2000),
    witness_name  text CHECK (char_length(witness_name) BETWEEN 1 AND 200),
    total_value   numeric(14, 2) NOT NULL CHECK (total_value >= 0),
    created_by    uuid NOT NULL REFERENCES users (id),
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX write_offs_branch_idx ON write_offs (branch_id, created_at DESC, id DESC);
CREATE INDEX write_offs_created_idx ON write_offs (created_at DESC, id DESC);

-- One line per batch written off. `is_controlled` is the medicine's flag
-- when it was written off: those lines form the destruction register, and
-- each names its witness.
CREATE TABLE write_off_items (
    id             uuid PRIMARY KEY,
    write_off_id   uuid NOT NULL REFERENCES write_offs (id),
    line_no        integer NOT NULL,
    batch_id       uuid NOT NULL,
    medicine_id    uuid NOT NULL,
    quantity       integer NOT NULL CHECK (quantity > 0),
    unit_cost      numeric(14, 2) NOT NULL CHECK (unit_cost >= 0),
    value          numeric(14, 2) NOT NULL CHECK (value >= 0),
    is_controlled  boolean NOT NULL,
    witness_name   text NOT NULL DEFAULT '' CHECK (char_length(witness_name) <= 200),
    UNIQUE (write_off_id, batch_id),
    FOREIGN KEY (batch_id, medicine_id) REFERENCES batches (id, medicine_id),
    CONSTRAINT write_off_items_controlled_witnessed CHECK (NOT is_controlled OR btrim(witness_name) <> '')
);
CREATE INDEX write_off_items_write_off_idx ON write_off_items (write_off_id, line_no);
CREATE INDEX write_off_items_controlled_idx ON write_off_items (write_off_id) WHERE is_controlled;
