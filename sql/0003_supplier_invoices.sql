-- Supplier invoices and the payments against them.
--
-- Invariants enforced here, whatever the number of server processes:
--   * an invoice is never overpaid: 0 <= paid_amount <= total_amount (CHECK),
--     and payments raise paid_amount only by a conditional update in the
--     payment row's own transaction (actors/src/supplier_invoices.rs);
--   * status always agrees with paid_amount (CHECK): `unpaid` at 0,
--     `partial` in between, `paid` when the total is covered.

CREATE TABLE supplier_invoices (
    id            uuid PRIMARY KEY,
    supplier_id   uuid NOT NULL REFERENCES suppliers (id),
    branch_id     uuid NOT NULL REFERENCES branches (id),
    invoice_no    text NOT NULL DEFAULT '',
    total_amount  numeric(14, 2) NOT NULL CHECK (total_amount > 0),
    paid_amount   numeric(14, 2) NOT NULL DEFAULT 0
                  CHECK (paid_amount >= 0 AND paid_amount <= total_amount),
    status        text NOT NULL DEFAULT 'unpaid'
                  CHECK (status IN ('unpaid', 'partial', 'paid')),
    due_date      date,
    notes         text NOT NULL DEFAULT '',
    created_by    uuid NOT NULL REFERENCES users (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT supplier_invoices_status_matches_paid CHECK (
        (status = 'unpaid' AND paid_amount = 0)
        OR (status = 'partial' AND paid_amount > 0 AND paid_amount < total_amount)
        OR (status = 'paid' AND paid_amount = total_amount)
    )
);
CREATE INDEX supplier_invoices_newest_idx ON supplier_invoices (created_at DESC, id DESC);
CREATE INDEX supplier_invoices_branch_idx ON supplier_invoices (branch_id, created_at DESC, id DESC);
CREATE INDEX supplier_invoices_supplier_idx ON supplier_invoices (supplier_id, created_at DESC, id DESC);

CREATE TABLE supplier_payments (
    id          uuid PRIMARY KEY,
    invoice_id  uuid NOT NULL REFERENCES supplier_invoices (id),
    amount      numeric(14, 2) NOT NULL CHECK (amount > 0),
    method      text NOT NULL DEFAULT 'cash',
    reference   text NOT NULL DEFAULT '',
    paid_by     uuid NOT NULL REFERENCES users (id),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX supplier_payments_invoice_idx ON supplier_payments (invoice_id, created_at);
