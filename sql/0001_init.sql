-- Foundation schema: organisation, branches, users and their refresh tokens,
-- devices (tills), settings, currencies and rates, cash sessions, the audit
-- log, the sync change log and the shared rate-limit counters.

CREATE TABLE organisations (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- ISO 4217 registry (a later migration completes the list).
CREATE TABLE currencies (
    code        text PRIMARY KEY CHECK (code ~ '^[A-Z]{3}$'),
    name        text NOT NULL,
    symbol      text NOT NULL DEFAULT '',
    exponent    integer NOT NULL DEFAULT 2 CHECK (exponent BETWEEN 0 AND 4),
    is_active   boolean NOT NULL DEFAULT true
);

INSERT INTO currencies (code, name, symbol, exponent) VALUES
    ('UGX', 'Ugandan Shilling', 'USh', 0),
    ('KES', 'Kenyan Shilling', 'KSh', 2),
    ('TZS', 'Tanzanian Shilling', 'TSh', 2),
    ('RWF', 'Rwandan Franc', 'FRw', 0),
    ('USD', 'US Dollar', '$', 2),
    ('EUR', 'Euro', '€', 2),
    ('GBP', 'Pound Sterling', '£', 2),
    ('SAR', 'Saudi Riyal', 'SAR', 2);

CREATE TABLE branches (
    id             uuid PRIMARY KEY,
    org_id         uuid NOT NULL REFERENCES organisations (id),
    code           text NOT NULL CHECK (length(code) BETWEEN 1 AND 32),
    name           text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    city           text NOT NULL DEFAULT '',
    vat_number     text NOT NULL DEFAULT '',
    address        text NOT NULL DEFAULT '',
    image_url      text NOT NULL DEFAULT '',
    currency_code  text NOT NULL REFERENCES currencies (code),
    is_active      boolean NOT NULL DEFAULT true,
    is_deleted     boolean NOT NULL DEFAULT false,
    rev            bigint NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX branches_code_key ON branches (org_id, upper(code)) WHERE NOT is_deleted;

CREATE TABLE users (
    id             uuid PRIMARY KEY,
    org_id         uuid NOT NULL REFERENCES organisations (id),
    branch_id      uuid NOT NULL REFERENCES branches (id),
    email          text NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    password_hash  text NOT NULL,
    full_name      text NOT NULL DEFAULT '',
    phone          text NOT NULL DEFAULT '',
    role           text NOT NULL CHECK (role IN ('admin', 'branch_manager', 'inventory_manager',
                                                 'pharmacist', 'cashier', 'auditor')),
    is_active      boolean NOT NULL DEFAULT true,
    is_deleted     boolean NOT NULL DEFAULT false,
    last_login_at  timestamptz,
    rev            bigint NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
CREATE INDEX users_branch_idx ON users (branch_id);

-- Opaque refresh tokens, stored as SHA-256 digests. A token works once:
-- rotation marks it used in the same statement that checks it.
CREATE TABLE refresh_tokens (
    token_hash  bytea PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id),
    family_id   uuid NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    revoked_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refresh_tokens_user_idx ON refresh_tokens (user_id);
CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id);

CREATE TABLE devices (
    id            uuid PRIMARY KEY,
    branch_id     uuid NOT NULL REFERENCES branches (id),
    name          text NOT NULL,
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    created_by    uuid REFERENCES users (id),
    last_seen_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX devices_branch_idx ON devices (branch_id);

-- The single organisation settings record. NULL means "not given".
CREATE TABLE settings (
    org_id                      uuid PRIMARY KEY REFERENCES organisations (id),
    name                        text,
    legal_name                  text,
    phone                       text,
    email                       text,
    address                     text,
    tin                         text,
    vat_number                  text,
    nda_license_no              text,
    premise_no                  text,
    receipt_header              text,
    receipt_footer              text,
    return_policy               text,
    show_vat_breakdown          boolean,
    show_pharmacist_on_receipt  boolean,
    auto_print_receipt          boolean NOT NULL DEFAULT true,
    base_currency               text NOT NULL DEFAULT 'UGX' REFERENCES currencies (code),
    rate_staleness_days         integer NOT NULL DEFAULT 7 CHECK (rate_staleness_days BETWEEN 1 AND 90),
    server_mode                 text NOT NULL DEFAULT 'hosted' CHECK (server_mode IN ('hosted', 'custom')),
    server_url                  text NOT NULL DEFAULT '',
    default_low_stock_threshold integer NOT NULL DEFAULT 10 CHECK (default_low_stock_threshold >= 0),
    expiry_warning_days         text NOT NULL DEFAULT '30,60,90',
    default_copies              integer NOT NULL DEFAULT 1 CHECK (default_copies BETWEEN 1 AND 20),
    tax_enabled                 boolean NOT NULL DEFAULT false,
    tax_rate                    numeric(6, 4) NOT NULL DEFAULT 0.18 CHECK (tax_rate BETWEEN 0 AND 1),
    time_zone                   text NOT NULL DEFAULT 'Africa/Kampala',
    updated_at                  timestamptz NOT NULL DEFAULT now(),
    updated_by                  uuid REFERENCES users (id)
);

-- rate = units of the branch currency per one unit of the base currency.
CREATE TABLE exchange_rates (
    id                  uuid PRIMARY KEY,
    currency_code       text NOT NULL REFERENCES currencies (code),
    base_currency_code  text NOT NULL REFERENCES currencies (code),
    rate                numeric(24, 10) NOT NULL CHECK (rate > 0),
    effective_at        timestamptz NOT NULL,
    created_by          uuid REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX exchange_rates_lookup_idx
    ON exchange_rates (currency_code, base_currency_code, effective_at DESC);

CREATE TABLE cash_sessions (
    id                 uuid PRIMARY KEY,
    user_id            uuid NOT NULL REFERENCES users (id),
    branch_id          uuid NOT NULL REFERENCES branches (id),
    opening_float      numeric(14, 2) NOT NULL DEFAULT 0 CHECK (opening_float >= 0),
    status             text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    break_minutes      integer NOT NULL DEFAULT 0 CHECK (break_minutes >= 0),
    opened_at          timestamptz NOT NULL DEFAULT now(),
    closed_at          timestamptz,
    closed_by          uuid REFERENCES users (id),
    total_sales        integer NOT NULL DEFAULT 0,
    total_revenue      numeric(14, 2) NOT NULL DEFAULT 0,
    total_vat          numeric(14, 2) NOT NULL DEFAULT 0,
    payment_breakdown  jsonb NOT NULL DEFAULT '{}',
    counted_cash       numeric(14, 2),
    expected_cash      numeric(14, 2),
    variance           numeric(14, 2),
    CHECK ((status = 'open') = (closed_at IS NULL))
);
-- At most one open session per branch, whatever the number of server processes.
CREATE UNIQUE INDEX cash_sessions_one_open_per_branch ON cash_sessions (branch_id) WHERE status = 'open';
CREATE INDEX cash_sessions_branch_idx ON cash_sessions (branch_id, opened_at DESC);

CREATE TABLE audit_log (
    id           uuid PRIMARY KEY,
    actor_id     uuid REFERENCES users (id),
    action       text NOT NULL,
    entity_type  text NOT NULL,
    entity_id    text,
    before       jsonb,
    after        jsonb,
    request_id   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_entity_idx ON audit_log (entity_type, created_at DESC);
CREATE INDEX audit_log_created_idx ON audit_log (created_at DESC);

-- Sync change log: one row per committed write to a synced entity, in the
-- write's own transaction (see actors/src/changes.rs for how readers avoid
-- skipping late commits).
CREATE TABLE change_log (
    rev         bigserial PRIMARY KEY,
    entity      text NOT NULL,
    entity_id   text NOT NULL,
    op          text NOT NULL CHECK (op IN ('create', 'update', 'delete')),
    branch_id   uuid,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX change_log_branch_idx ON change_log (branch_id, rev);

-- Fixed-window counters shared by every server process (login attempts,
-- marketing enquiries).
CREATE TABLE rate_limits (
    key           text NOT NULL,
    window_start  timestamptz NOT NULL,
    hits          integer NOT NULL,
    PRIMARY KEY (key, window_start)
);
