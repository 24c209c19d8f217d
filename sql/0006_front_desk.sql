-- Front desk: prescription numbering, will-call pickups, manager approvals
-- and public marketing enquiries.
--
-- Invariants enforced here, whatever the number of server processes:
--   * rx_number is unique across the chain: it comes from a counter row per
--     branch code, bumped in the prescription's own transaction;
--   * only a dispensed prescription names a sale, dispenser and dispense
--     time (CHECK; the dispense route always sets all three);
--   * a will-call is `picked_up` exactly when it has `picked_up_at` (CHECK);
--   * an approval is decided exactly when it has a decider and a time, and
--     the decider is never the requester (CHECK).

-- Keyed by branch code, not id: a code reused by a later branch continues
-- the old numbering instead of issuing the same numbers again.
CREATE TABLE prescription_counters (
    branch_code  text PRIMARY KEY,
    last_number  bigint NOT NULL DEFAULT 0 CHECK (last_number >= 0)
);

CREATE UNIQUE INDEX prescriptions_rx_number_key ON prescriptions (rx_number);
-- The list: one branch, pending first, newest first.
CREATE INDEX prescriptions_branch_list_idx
    ON prescriptions (branch_id, (status = 'PENDING') DESC, created_at DESC, id DESC)
    WHERE NOT is_deleted;
ALTER TABLE prescriptions
    ADD CONSTRAINT prescriptions_dispense_consistent CHECK (
        status = 'DISPENSED' OR (sale_id IS NULL AND dispensed_by IS NULL AND dispensed_at IS NULL)
    ),
    ADD CONSTRAINT prescriptions_sale_fk FOREIGN KEY (sale_id) REFERENCES sales (id);

-- Lines keep the order they were written in.
ALTER TABLE prescription_items ADD COLUMN line_no integer NOT NULL DEFAULT 0;

CREATE TABLE will_call_pickups (
    id                  uuid PRIMARY KEY,
    branch_id           uuid NOT NULL REFERENCES branches (id),
    prescription_id     uuid REFERENCES prescriptions (id),
    sale_id             uuid REFERENCES sales (id),
    patient_name        text NOT NULL CHECK (length(patient_name) BETWEEN 1 AND 200),
    patient_phone       text NOT NULL DEFAULT '',
    status              text NOT NULL DEFAULT 'ready' CHECK (status IN ('ready', 'picked_up', 'cancelled')),
    signature_captured  boolean NOT NULL DEFAULT false,
    picked_up_at        timestamptz,
    created_by          uuid NOT NULL REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((status = 'picked_up') = (picked_up_at IS NOT NULL))
);
CREATE INDEX will_call_pickups_branch_idx ON will_call_pickups (branch_id, created_at DESC, id DESC);

CREATE TABLE approvals (
    id            uuid PRIMARY KEY,
    branch_id     uuid NOT NULL REFERENCES branches (id),
    kind          text NOT NULL CHECK (length(kind) BETWEEN 1 AND 100),
    reference_id  text,
    requested_by  uuid NOT NULL REFERENCES users (id),
    -- Who decided, whether the decision was to approve or to reject.
    approved_by   uuid REFERENCES users (id),
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    reason        text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz,
    CHECK ((status = 'pending') = (approved_by IS NULL)),
    CHECK ((status = 'pending') = (decided_at IS NULL)),
    CHECK (approved_by IS NULL OR approved_by <> requested_by)
);
CREATE INDEX approvals_branch_idx ON approvals (branch_id, created_at DESC, id DESC);
CREATE INDEX approvals_created_idx ON approvals (created_at DESC, id DESC);

-- Public enquiries; `rate_limits` keeps them to a few per email and address.
CREATE TABLE marketing_enquiries (
    id              uuid PRIMARY KEY,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    email           text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    phone           text NOT NULL DEFAULT '',
    topic           text NOT NULL DEFAULT '',
    message         text NOT NULL CHECK (length(message) BETWEEN 1 AND 5000),
    client_address  text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX marketing_enquiries_created_idx ON marketing_enquiries (created_at DESC);
