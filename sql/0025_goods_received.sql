-- Goods received notes: a delivery, received against purchase orders (or
-- unplanned), with rejects and charges, posted as batches at landed cost.
--
-- Invariants enforced here, whatever the number of server processes:
--   * `grn_number` is unique per branch (`<BRANCH CODE>-GRN-<6 digits>`):
--     the branch's counter row is bumped in the note's own transaction;
--   * a posted note carries its posting time and poster, a draft none
--     (CHECK), and a posted line names the batch it became when it
--     accepted anything (CHECK);
--   * a line never bills more than it received: supplier invoices raise
--     `quantity_invoiced` by a conditional update under the line's row
--     lock, and a CHECK keeps it within `quantity_received`;
--   * the order lines a note receives against move by conditional updates
--     under their row locks (migration 0024 keeps received ≤ ordered
--     unless over-receipt was allowed).

CREATE TABLE goods_received_counters (
    branch_id  uuid PRIMARY KEY REFERENCES branches (id),
    last_seq   bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
);

CREATE TABLE goods_received_notes (
    id                  uuid PRIMARY KEY,
    branch_id           uuid NOT NULL REFERENCES branches (id),
    supplier_id         uuid NOT NULL REFERENCES suppliers (id),
    purchase_order_id   uuid REFERENCES purchase_orders (id),
    seq                 bigint NOT NULL CHECK (seq > 0),
    grn_number          text NOT NULL CHECK (char_length(grn_number) BETWEEN 1 AND 100),
    delivery_reference  text NOT NULL CHECK (char_length(delivery_reference) BETWEEN 1 AND 200),
    status              text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'posted')),
    -- `POST /purchases`: a one-line note posted at once.
    origin              text NOT NULL DEFAULT 'delivery' CHECK (origin IN ('delivery', 'purchase')),
    lines_total         numeric(14, 2) NOT NULL CHECK (lines_total >= 0),
    charges_total       numeric(14, 2) NOT NULL DEFAULT 0 CHECK (charges_total >= 0),
    total               numeric(14, 2) NOT NULL CHECK (total = lines_total + charges_total),
    allow_over_receipt  boolean NOT NULL DEFAULT false,
    accept_short_dated  boolean NOT NULL DEFAULT false,
    created_by          uuid NOT NULL REFERENCES users (id),
    posted_by           uuid REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    posted_at           timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (branch_id, seq),
    UNIQUE (branch_id, grn_number),
    CONSTRAINT goods_received_notes_posted_consistent CHECK (
        (status = 'posted') = (posted_at IS NOT NULL)
        AND (status = 'posted') = (posted_by IS NOT NULL)
    )
);
CREATE INDEX goods_received_notes_newest_idx ON goods_received_notes (created_at DESC, id DESC);
CREATE INDEX goods_received_notes_branch_idx ON goods_received_notes (branch_id, created_at DESC, id DESC);
-- The purchases report sums posted notes' charges by posting time.
CREATE INDEX goods_received_notes_posted_idx ON goods_received_notes (posted_at)
    INCLUDE (branch_id, supplier_id, charges_total) WHERE status = 'posted';

-- Quantities count base units; `pack_id`/`pack_units` say how the line was
-- received and `unit_cost` is per pack then.
CREATE TABLE goods_received_lines (
    id                      uuid PRIMARY KEY,
    note_id                 uuid NOT NULL REFERENCES goods_received_notes (id),
    line_no                 integer NOT NULL CHECK (line_no > 0),
    purchase_order_line_id  uuid REFERENCES purchase_order_lines (id),
    medicine_id             uuid NOT NULL REFERENCES medicines (id),
    pack_id                 uuid REFERENCES medicine_packs (id),
    pack_units              integer NOT NULL DEFAULT 1 CHECK (pack_units >= 1),
    batch_number            text NOT NULL CHECK (char_length(batch_number) BETWEEN 1 AND 100),
    expiry_date             date NOT NULL,
    manufacturing_date      date,
    quantity_received       integer NOT NULL CHECK (quantity_received >= 0),
    quantity_rejected       integer NOT NULL DEFAULT 0 CHECK (quantity_rejected >= 0),
    rejection_reason        text CHECK (char_length(rejection_reason) BETWEEN 1 AND 500),
    unit_cost               numeric(14, 4) NOT NULL CHECK (unit_cost >= 0),
    -- Accepted quantity × unit cost, to the cent.
    line_value              numeric(14, 2) NOT NULL CHECK (line_value >= 0),
    -- The line's share of the note's charges (by line value).
    charge_share            numeric(14, 2) NOT NULL DEFAULT 0 CHECK (charge_share >= 0),
    -- What the accepted units cost landed: line_value + charge_share.
    landed_total            numeric(14, 2) NOT NULL CHECK (landed_total = line_value + charge_share),
    -- Per base unit, landed, 4 places (what the batch records).
    landed_unit_cost        numeric(14, 4) NOT NULL CHECK (landed_unit_cost >= 0),
    batch_id                uuid REFERENCES batches (id),
    quantity_invoiced       integer NOT NULL DEFAULT 0 CHECK (quantity_invoiced >= 0),
    UNIQUE (note_id, line_no),
    CONSTRAINT goods_received_lines_something CHECK (quantity_received + quantity_rejected > 0),
    CONSTRAINT goods_received_lines_whole_packs CHECK (
        quantity_received % pack_units = 0 AND quantity_rejected % pack_units = 0),
    CONSTRAINT goods_received_lines_rejects_have_reason CHECK (
        (quantity_rejected > 0) = (rejection_reason IS NOT NULL)),
    CONSTRAINT goods_received_lines_billed_within_received CHECK (
        quantity_invoiced <= quantity_received)
);
CREATE INDEX goods_received_lines_note_idx ON goods_received_lines (note_id, line_no);
-- The purchases report tells batches with a note from those without.
CREATE INDEX goods_received_lines_batch_idx ON goods_received_lines (batch_id)
    WHERE batch_id IS NOT NULL;
CREATE INDEX goods_received_lines_order_line_idx ON goods_received_lines (purchase_order_line_id)
    WHERE purchase_order_line_id IS NOT NULL;

CREATE TABLE goods_received_charges (
    id       uuid PRIMARY KEY,
    note_id  uuid NOT NULL REFERENCES goods_received_notes (id),
    line_no  integer NOT NULL CHECK (line_no > 0),
    kind     text NOT NULL CHECK (kind IN ('freight', 'insurance', 'clearing', 'other')),
    amount   numeric(14, 2) NOT NULL CHECK (amount > 0),
    UNIQUE (note_id, line_no)
);
