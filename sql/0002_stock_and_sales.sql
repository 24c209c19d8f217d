-- Catalogue, stock ledger and sales: categories, medicines, suppliers,
-- customers and their ledger, prescriptions, batches and stock movements,
-- coupons, the per-branch invoice counters, sales and their lines, the
-- classified-drugs register, transfers and stock counts.
--
-- Invariants enforced here, whatever the number of server processes:
--   * a batch's qty_remaining never goes below zero (CHECK) and equals the
--     sum of its stock movements (every write goes through one function in
--     actors/src/stock.rs that updates the batch and appends the movement);
--   * icv is gapless and unique per branch: the counter row is bumped in the
--     sale's own transaction and UNIQUE (branch_id, icv) backs it;
--   * a customer's balance never goes below zero (CHECK);
--   * a coupon's usage_count never exceeds max_uses (CHECK).

CREATE TABLE categories (
    slug        text PRIMARY KEY CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name        text NOT NULL,
    rev         bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE medicines (
    id                         uuid PRIMARY KEY,
    name                       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    generic_name               text NOT NULL DEFAULT '',
    barcode                    text NOT NULL DEFAULT '',
    category                   text REFERENCES categories (slug),
    form                       text NOT NULL DEFAULT '',
    strength                   text NOT NULL DEFAULT '',
    unit                       text NOT NULL DEFAULT '',
    selling_price              numeric(14, 2) NOT NULL CHECK (selling_price >= 0),
    -- 0 means no ceiling is filed.
    max_public_price           numeric(14, 2) NOT NULL DEFAULT 0 CHECK (max_public_price >= 0),
    low_stock_threshold        integer NOT NULL DEFAULT 10 CHECK (low_stock_threshold >= 0),
    requires_prescription      boolean NOT NULL DEFAULT false,
    is_controlled              boolean NOT NULL DEFAULT false,
    control_schedule           text NOT NULL DEFAULT '',
    vat_category               text NOT NULL DEFAULT 'standard'
                               CHECK (vat_category IN ('standard', 'zero', 'exempt')),
    requires_cold_chain        boolean NOT NULL DEFAULT false,
    regulator_registration_no  text NOT NULL DEFAULT '',
    image_key                  text NOT NULL DEFAULT '',
    image_url                  text NOT NULL DEFAULT '',
    is_active                  boolean NOT NULL DEFAULT true,
    is_deleted                 boolean NOT NULL DEFAULT false,
    rev                        bigint NOT NULL DEFAULT 0,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX medicines_barcode_key ON medicines (barcode) WHERE barcode <> '' AND NOT is_deleted;
CREATE INDEX medicines_name_idx ON medicines (lower(name));
CREATE INDEX medicines_category_idx ON medicines (category);

CREATE TABLE suppliers (
    id                 uuid PRIMARY KEY,
    name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    tax_number         text NOT NULL DEFAULT '',
    contact_person     text NOT NULL DEFAULT '',
    phone              text NOT NULL DEFAULT '',
    email              text NOT NULL DEFAULT '',
    address            text NOT NULL DEFAULT '',
    image_url          text NOT NULL DEFAULT '',
    supplier_type      text NOT NULL DEFAULT 'distributor',
    lead_time_days     integer NOT NULL DEFAULT 7 CHECK (lead_time_days >= 0),
    reliability_score  numeric(6, 2) NOT NULL DEFAULT 100 CHECK (reliability_score BETWEEN 0 AND 100),
    is_active          boolean NOT NULL DEFAULT true,
    is_deleted         boolean NOT NULL DEFAULT false,
    rev                bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX suppliers_name_idx ON suppliers (lower(name));

-- Customers are organisation-wide; a customer may buy at any branch.
CREATE TABLE customers (
    id                 uuid PRIMARY KEY,
    name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    phone              text NOT NULL DEFAULT '',
    national_id        text NOT NULL DEFAULT '',
    notes              text NOT NULL DEFAULT '',
    image_url          text NOT NULL DEFAULT '',
    is_credit_allowed  boolean NOT NULL DEFAULT false,
    credit_limit       numeric(14, 2) NOT NULL DEFAULT 0 CHECK (credit_limit >= 0),
    current_balance    numeric(14, 2) NOT NULL DEFAULT 0 CHECK (current_balance >= 0),
    is_deleted         boolean NOT NULL DEFAULT false,
    rev                bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customers_name_idx ON customers (lower(name));
CREATE INDEX customers_national_id_idx ON customers (national_id) WHERE national_id <> '';

-- Every change of a customer's balance, with the balance after it. OPENING
-- and SALE raise the balance, PAYMENT lowers it.
CREATE TABLE customer_ledger (
    id                uuid PRIMARY KEY,
    customer_id       uuid NOT NULL REFERENCES customers (id),
    branch_id         uuid REFERENCES branches (id),
    transaction_type  text NOT NULL CHECK (transaction_type IN ('OPENING', 'SALE', 'PAYMENT')),
    amount            numeric(14, 2) NOT NULL CHECK (amount > 0),
    balance_after     numeric(14, 2) NOT NULL CHECK (balance_after >= 0),
    reference_id      uuid,
    notes             text NOT NULL DEFAULT '',
    created_by        uuid REFERENCES users (id),
    rev               bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customer_ledger_customer_idx ON customer_ledger (customer_id, created_at DESC, id DESC);

CREATE TABLE prescriptions (
    id                  uuid PRIMARY KEY,
    branch_id           uuid NOT NULL REFERENCES branches (id),
    rx_number           text NOT NULL,
    patient_name        text NOT NULL DEFAULT '',
    patient_id_number   text NOT NULL DEFAULT '',
    prescriber_name     text NOT NULL DEFAULT '',
    prescriber_license  text NOT NULL DEFAULT '',
    status              text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DISPENSED', 'CANCELLED')),
    sale_id             uuid,
    dispensed_by        uuid REFERENCES users (id),
    notes               text NOT NULL DEFAULT '',
    is_deleted          boolean NOT NULL DEFAULT false,
    created_by          uuid REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    dispensed_at        timestamptz
);
CREATE INDEX prescriptions_branch_idx ON prescriptions (branch_id, created_at DESC);

CREATE TABLE prescription_items (
    id                   uuid PRIMARY KEY,
    prescription_id      uuid NOT NULL REFERENCES prescriptions (id),
    medicine_id          uuid NOT NULL REFERENCES medicines (id),
    quantity             integer NOT NULL CHECK (quantity > 0),
    dosage_instructions  text NOT NULL DEFAULT ''
);
CREATE INDEX prescription_items_rx_idx ON prescription_items (prescription_id);

-- A batch of one medicine at one branch. `origin` tells purchases from
-- stock that arrived by transfer (the purchases report counts only the former).
CREATE TABLE batches (
    id                  uuid PRIMARY KEY,
    medicine_id         uuid NOT NULL REFERENCES medicines (id),
    branch_id           uuid NOT NULL REFERENCES branches (id),
    supplier_id         uuid REFERENCES suppliers (id),
    batch_number        text NOT NULL,
    expiry_date         date NOT NULL,
    manufacturing_date  date,
    qty_received        integer NOT NULL CHECK (qty_received >= 0),
    qty_remaining       integer NOT NULL CHECK (qty_remaining >= 0),
    unit_cost           numeric(14, 2) NOT NULL CHECK (unit_cost >= 0),
    status              text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'depleted')),
    regulator_status    text NOT NULL DEFAULT 'active' CHECK (regulator_status IN ('active', 'quarantined', 'recalled')),
    origin              text NOT NULL DEFAULT 'purchase' CHECK (origin IN ('purchase', 'transfer')),
    notes               text NOT NULL DEFAULT '',
    created_by          uuid REFERENCES users (id),
    is_deleted          boolean NOT NULL DEFAULT false,
    rev                 bigint NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX batches_stock_idx ON batches (branch_id, medicine_id, expiry_date, created_at);
CREATE INDEX batches_medicine_idx ON batches (medicine_id);
CREATE INDEX batches_created_idx ON batches (created_at);

-- The stock ledger. qty is signed: IN, TRANSFER_IN and reversals add,
-- SALE and TRANSFER_OUT take away, ADJUST either.
CREATE TABLE stock_movements (
    id              uuid PRIMARY KEY,
    batch_id        uuid NOT NULL REFERENCES batches (id),
    medicine_id     uuid NOT NULL REFERENCES medicines (id),
    branch_id       uuid NOT NULL REFERENCES branches (id),
    kind            text NOT NULL CHECK (kind IN ('IN', 'SALE', 'SALE_REVERSAL', 'ADJUST',
                                                  'TRANSFER_OUT', 'TRANSFER_IN', 'TRANSFER_CANCEL')),
    qty             integer NOT NULL CHECK (qty <> 0),
    reference_type  text NOT NULL DEFAULT '',
    reference_id    uuid,
    created_by      uuid REFERENCES users (id),
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stock_movements_batch_idx ON stock_movements (batch_id);
CREATE INDEX stock_movements_branch_idx ON stock_movements (branch_id, medicine_id);

CREATE TABLE coupons (
    id              uuid PRIMARY KEY,
    code            text NOT NULL CHECK (code = upper(code) AND length(code) BETWEEN 1 AND 64),
    type            text NOT NULL DEFAULT 'promotional',
    discount_type   text NOT NULL CHECK (discount_type IN ('percentage', 'fixed')),
    discount_value  numeric(14, 2) NOT NULL CHECK (discount_value > 0),
    description     text NOT NULL DEFAULT '',
    applies_to      text NOT NULL DEFAULT 'all' CHECK (applies_to IN ('all', 'medicine', 'category')),
    applies_to_id   text,
    valid_from      timestamptz,
    valid_until     timestamptz,
    max_uses        integer CHECK (max_uses IS NULL OR max_uses >= 0),
    usage_count     integer NOT NULL DEFAULT 0 CHECK (usage_count >= 0),
    image_url       text NOT NULL DEFAULT '',
    is_active       boolean NOT NULL DEFAULT true,
    is_deleted      boolean NOT NULL DEFAULT false,
    created_by      uuid REFERENCES users (id),
    rev             bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (discount_type <> 'percentage' OR discount_value <= 100),
    CHECK (max_uses IS NULL OR usage_count <= max_uses)
);
CREATE UNIQUE INDEX coupons_code_key ON coupons (code);

-- One row per branch: the last icv issued and the hash of that invoice.
-- Bumped in each sale's transaction, so a rolled-back sale leaves no gap.
CREATE TABLE invoice_counters (
    branch_id  uuid PRIMARY KEY REFERENCES branches (id),
    last_icv   bigint NOT NULL DEFAULT 0 CHECK (last_icv >= 0),
    last_hash  text NOT NULL
);

CREATE TABLE sales (
    id                     uuid PRIMARY KEY,
    branch_id              uuid NOT NULL REFERENCES branches (id),
    icv                    bigint NOT NULL CHECK (icv > 0),
    invoice_number         text NOT NULL,
    customer_id            uuid REFERENCES customers (id),
    prescription_id        uuid REFERENCES prescriptions (id),
    coupon_id              uuid REFERENCES coupons (id),
    coupon_code            text,
    payment_method         text NOT NULL CHECK (payment_method IN ('cash', 'card', 'mobile_money', 'credit')),
    gross                  numeric(14, 2) NOT NULL CHECK (gross >= 0),
    discount               numeric(14, 2) NOT NULL DEFAULT 0 CHECK (discount >= 0),
    subtotal               numeric(14, 2) NOT NULL,
    vat                    numeric(14, 2) NOT NULL CHECK (vat >= 0),
    total                  numeric(14, 2) NOT NULL CHECK (total >= 0),
    cash_session_id        uuid REFERENCES cash_sessions (id),
    device_id              uuid REFERENCES devices (id),
    client_mutation_id     text,
    request_digest         text,
    status                 text NOT NULL DEFAULT 'completed' CHECK (status IN ('completed')),
    previous_invoice_hash  text NOT NULL,
    invoice_hash           text NOT NULL,
    created_by             uuid NOT NULL REFERENCES users (id),
    rev                    bigint NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (branch_id, icv),
    UNIQUE (branch_id, invoice_number)
);
CREATE INDEX sales_branch_created_idx ON sales (branch_id, created_at DESC);
CREATE INDEX sales_created_idx ON sales (created_at DESC);
CREATE INDEX sales_customer_idx ON sales (customer_id) WHERE customer_id IS NOT NULL;
-- One sale per client mutation id: per device for pushed sales, per branch
-- for sales posted straight to /sales.
CREATE UNIQUE INDEX sales_device_mutation_key ON sales (device_id, client_mutation_id)
    WHERE device_id IS NOT NULL AND client_mutation_id IS NOT NULL;
CREATE UNIQUE INDEX sales_branch_mutation_key ON sales (branch_id, client_mutation_id)
    WHERE device_id IS NULL AND client_mutation_id IS NOT NULL;

-- One row per (sale line, batch it was taken from).
CREATE TABLE sale_items (
    id            uuid PRIMARY KEY,
    sale_id       uuid NOT NULL REFERENCES sales (id),
    line_no       integer NOT NULL,
    medicine_id   uuid NOT NULL REFERENCES medicines (id),
    batch_id      uuid NOT NULL REFERENCES batches (id),
    quantity      integer NOT NULL CHECK (quantity > 0),
    unit_price    numeric(14, 2) NOT NULL CHECK (unit_price >= 0),
    discount      numeric(14, 2) NOT NULL DEFAULT 0 CHECK (discount >= 0),
    line_total    numeric(14, 2) NOT NULL CHECK (line_total >= 0),
    vat_rate      numeric(6, 4) NOT NULL CHECK (vat_rate BETWEEN 0 AND 1),
    vat_amount    numeric(14, 2) NOT NULL CHECK (vat_amount >= 0),
    cost_at_sale  numeric(14, 2) NOT NULL
);
CREATE INDEX sale_items_sale_idx ON sale_items (sale_id, line_no);
CREATE INDEX sale_items_medicine_idx ON sale_items (medicine_id);

-- The classified-drugs register: one row per controlled medicine sold.
CREATE TABLE controlled_dispenses (
    id                   uuid PRIMARY KEY,
    sale_id              uuid NOT NULL REFERENCES sales (id),
    branch_id            uuid NOT NULL REFERENCES branches (id),
    medicine_id          uuid NOT NULL REFERENCES medicines (id),
    quantity             integer NOT NULL CHECK (quantity > 0),
    patient_national_id  text NOT NULL DEFAULT '',
    doctor_license       text NOT NULL DEFAULT '',
    dispensed_by         uuid NOT NULL REFERENCES users (id),
    dispensed_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX controlled_dispenses_branch_idx ON controlled_dispenses (branch_id, dispensed_at DESC);

CREATE TABLE transfers (
    id              uuid PRIMARY KEY,
    medicine_id     uuid NOT NULL REFERENCES medicines (id),
    from_branch_id  uuid NOT NULL REFERENCES branches (id),
    to_branch_id    uuid NOT NULL REFERENCES branches (id),
    qty             integer NOT NULL CHECK (qty > 0),
    status          text NOT NULL DEFAULT 'in_transit' CHECK (status IN ('in_transit', 'received', 'cancelled')),
    notes           text NOT NULL DEFAULT '',
    created_by      uuid NOT NULL REFERENCES users (id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    received_by     uuid REFERENCES users (id),
    received_at     timestamptz,
    cancelled_by    uuid REFERENCES users (id),
    cancelled_at    timestamptz,
    CHECK (from_branch_id <> to_branch_id)
);
CREATE INDEX transfers_created_idx ON transfers (created_at DESC);

-- Which source batches a transfer drew from, and the batch each became at
-- the destination once received.
CREATE TABLE transfer_lines (
    transfer_id      uuid NOT NULL REFERENCES transfers (id),
    source_batch_id  uuid NOT NULL REFERENCES batches (id),
    qty              integer NOT NULL CHECK (qty > 0),
    dest_batch_id    uuid REFERENCES batches (id),
    PRIMARY KEY (transfer_id, source_batch_id)
);

CREATE TABLE stock_counts (
    id                uuid PRIMARY KEY,
    branch_id         uuid NOT NULL REFERENCES branches (id),
    adjustments_made  integer NOT NULL,
    created_by        uuid NOT NULL REFERENCES users (id),
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE stock_count_lines (
    stock_count_id    uuid NOT NULL REFERENCES stock_counts (id),
    medicine_id       uuid NOT NULL REFERENCES medicines (id),
    db_quantity       integer NOT NULL,
    counted_quantity  integer NOT NULL CHECK (counted_quantity >= 0),
    delta             integer NOT NULL,
    notes             text NOT NULL DEFAULT '',
    PRIMARY KEY (stock_count_id, medicine_id)
);

-- The organisation's calendar day (settings.time_zone, default Africa/Kampala):
-- batches expire and "today" starts by it.
CREATE FUNCTION org_today() RETURNS date
    LANGUAGE sql STABLE
    AS $$ SELECT (now() AT TIME ZONE coalesce((SELECT time_zone FROM settings LIMIT 1), 'Africa/Kampala'))::date $$;

-- Counter rows for the branches that already exist; new branches get theirs
-- when they are created.
INSERT INTO invoice_counters (branch_id, last_icv, last_hash)
SELECT id, 0, repeat('0', 64) FROM branches;
