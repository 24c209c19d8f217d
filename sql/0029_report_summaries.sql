-- Report summaries: what the sales, VAT and margins reports and the stock
-- valuation read instead of a year of lines and movements (see "Report
-- summaries" in docs/performance.md).
--
-- Three tables, all keyed by branch (so two branches never wait on each
-- other's rows) and by the organisation's calendar day or month:
--   sales_days      per branch, day and payment (or refund) method: sales
--                   and credit notes as headers, and their lines' VAT
--                   figures and cost;
--   medicine_days   per branch, day and medicine: lines sold less lines
--                   credited, and the stock moved (units and value);
--   medicine_months the same per calendar month, so a year is twelve rows
--                   per medicine and branch rather than 365.
-- Triggers write them in the same transaction as the rows they sum: one
-- set-based upsert per statement (a group commit of fifty sales is one
-- upsert per summary, not fifty). Rows are added to, never recomputed, on
-- the write path; the rare changes to rows already summed (a credit note
-- issued after approval, a sale moved, a batch whose unit value changes,
-- a new time zone) recompute the slices they touch from the ledger with
-- `refresh_report_summaries`, which is also how the tables are built.
-- `report_summary_differences` compares every row with the ledger; the
-- invariant checks and a property test call it. The tables hold no foreign
-- keys: they are derived from the ledger, which holds them, and a key check
-- on every new summary row would cost the write path for nothing.

-- The organisation's time zone (the one report windows use).
CREATE FUNCTION org_time_zone() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce((SELECT time_zone FROM settings LIMIT 1), 'Africa/Kampala')
$$;

-- What one unit of a batch is worth: its receipt's total shared over its
-- units when it was received by the pack, else its unit cost. Unrounded,
-- so units × value adds up exactly whichever way the units are grouped.
CREATE FUNCTION batch_unit_value(unit_cost numeric, received_total numeric, qty_received integer)
    RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN received_total IS NOT NULL AND qty_received > 0
                THEN received_total / qty_received
                ELSE unit_cost END
$$;

CREATE TABLE sales_days (
    branch_id         uuid NOT NULL,
    day               date NOT NULL,
    method            text NOT NULL,
    sales_count       bigint NOT NULL DEFAULT 0,
    sales_total       numeric NOT NULL DEFAULT 0,
    sales_vat         numeric NOT NULL DEFAULT 0,
    sales_subtotal    numeric NOT NULL DEFAULT 0,
    returns_count     bigint NOT NULL DEFAULT 0,
    returns_total     numeric NOT NULL DEFAULT 0,
    returns_vat       numeric NOT NULL DEFAULT 0,
    returns_subtotal  numeric NOT NULL DEFAULT 0,
    -- Lines: sold ones add, credited ones subtract.
    sale_lines        bigint NOT NULL DEFAULT 0,
    return_lines      bigint NOT NULL DEFAULT 0,
    taxable_0         numeric NOT NULL DEFAULT 0,
    taxable_std       numeric NOT NULL DEFAULT 0,
    line_vat          numeric NOT NULL DEFAULT 0,
    line_total        numeric NOT NULL DEFAULT 0,
    cost              numeric NOT NULL DEFAULT 0,
    PRIMARY KEY (branch_id, day, method)
) WITH (fillfactor = 80);
CREATE INDEX sales_days_day_idx ON sales_days (day);

CREATE TABLE medicine_days (
    branch_id    uuid NOT NULL,
    day          date NOT NULL,
    medicine_id  uuid NOT NULL,
    -- Sale and credit-note lines (both count as activity).
    lines        bigint NOT NULL DEFAULT 0,
    quantity     bigint NOT NULL DEFAULT 0,
    revenue      numeric NOT NULL DEFAULT 0,
    net          numeric NOT NULL DEFAULT 0,
    cost         numeric NOT NULL DEFAULT 0,
    -- Stock moved that day: units and their value at batch cost.
    stock_qty    bigint NOT NULL DEFAULT 0,
    stock_value  numeric NOT NULL DEFAULT 0,
    PRIMARY KEY (branch_id, day, medicine_id)
) WITH (fillfactor = 80);
CREATE INDEX medicine_days_day_idx ON medicine_days (day);

CREATE TABLE medicine_months (
    branch_id    uuid NOT NULL,
    month        date NOT NULL CHECK (extract(day FROM month) = 1),
    medicine_id  uuid NOT NULL,
    lines        bigint NOT NULL DEFAULT 0,
    quantity     bigint NOT NULL DEFAULT 0,
    revenue      numeric NOT NULL DEFAULT 0,
    net          numeric NOT NULL DEFAULT 0,
    cost         numeric NOT NULL DEFAULT 0,
    stock_qty    bigint NOT NULL DEFAULT 0,
    stock_value  numeric NOT NULL DEFAULT 0,
    PRIMARY KEY (branch_id, month, medicine_id)
) WITH (fillfactor = 80);
CREATE INDEX medicine_months_month_idx ON medicine_months (month);

-- The ledger's view of the summaries, per branch and day. Each is what the
-- summary rows must hold; `refresh_report_summaries` writes them and
-- `report_summary_differences` compares with them.
CREATE FUNCTION ledger_sales_days(b uuid, from_day date, to_day date)
    RETURNS SETOF sales_days LANGUAGE sql STABLE AS $$
    WITH z AS (SELECT org_time_zone() AS tz),
    w AS (SELECT from_day::timestamp AT TIME ZONE z.tz AS lo,
                 (to_day + 1)::timestamp AT TIME ZONE z.tz AS hi, z.tz FROM z),
    rows AS (
        SELECT s.branch_id, (s.created_at AT TIME ZONE w.tz)::date AS day, s.payment_method AS method,
               1 AS sales_count, s.total AS sales_total, s.vat AS sales_vat, s.subtotal AS sales_subtotal,
               0 AS returns_count, 0::numeric AS returns_total, 0::numeric AS returns_vat,
               0::numeric AS returns_subtotal, 0 AS sale_lines, 0 AS return_lines,
               0::numeric AS taxable_0, 0::numeric AS taxable_std, 0::numeric AS line_vat,
               0::numeric AS line_total, 0::numeric AS cost
        FROM sales s, w
        WHERE s.created_at >= w.lo AND s.created_at < w.hi AND (b IS NULL OR s.branch_id = b)
        UNION ALL
        SELECT i.branch_id, (i.sold_at AT TIME ZONE w.tz)::date, s.payment_method,
               0, 0, 0, 0, 0, 0, 0, 0, 1, 0,
               CASE WHEN i.vat_rate = 0 THEN i.line_total - i.vat_amount ELSE 0 END,
               CASE WHEN i.vat_rate > 0 THEN i.line_total - i.vat_amount ELSE 0 END,
               i.vat_amount, i.line_total, i.quantity * i.cost_at_sale
        FROM sale_items i JOIN sales s ON s.id = i.sale_id, w
        WHERE i.sold_at >= w.lo AND i.sold_at < w.hi AND (b IS NULL OR i.branch_id = b)
        UNION ALL
        SELECT r.branch_id, (r.issued_at AT TIME ZONE w.tz)::date, r.refund_method,
               0, 0, 0, 0, 1, r.total, r.vat, r.subtotal, 0, 0, 0, 0, 0, 0, 0
        FROM sale_returns r, w
        WHERE r.status = 'issued' AND r.issued_at >= w.lo AND r.issued_at < w.hi
          AND (b IS NULL OR r.branch_id = b)
        UNION ALL
        SELECT r.branch_id, (r.issued_at AT TIME ZONE w.tz)::date, r.refund_method,
               0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
               CASE WHEN ri.vat_rate = 0 THEN ri.vat_amount - ri.line_total ELSE 0 END,
               CASE WHEN ri.vat_rate > 0 THEN ri.vat_amount - ri.line_total ELSE 0 END,
               -ri.vat_amount, -ri.line_total,
               CASE WHEN ri.restocked THEN -ri.quantity * i.cost_at_sale ELSE 0 END
        FROM sale_returns r
        JOIN sale_return_items ri ON ri.return_id = r.id
        JOIN sale_items i ON i.id = ri.sale_item_id, w
        WHERE r.status = 'issued' AND r.issued_at >= w.lo AND r.issued_at < w.hi
          AND (b IS NULL OR r.branch_id = b))
    SELECT branch_id, day, method, sum(sales_count)::bigint, sum(sales_total), sum(sales_vat),
           sum(sales_subtotal), sum(returns_count)::bigint, sum(returns_total), sum(returns_vat),
           sum(returns_subtotal), sum(sale_lines)::bigint, sum(return_lines)::bigint,
           sum(taxable_0), sum(taxable_std), sum(line_vat), sum(line_total), sum(cost)
    FROM rows GROUP BY branch_id, day, method
$$;

CREATE FUNCTION ledger_medicine_days(b uuid, from_day date, to_day date)
    RETURNS SETOF medicine_days LANGUAGE sql STABLE AS $$
    WITH z AS (SELECT org_time_zone() AS tz),
    w AS (SELECT from_day::timestamp AT TIME ZONE z.tz AS lo,
                 (to_day + 1)::timestamp AT TIME ZONE z.tz AS hi, z.tz FROM z),
    rows AS (
        SELECT i.branch_id, (i.sold_at AT TIME ZONE w.tz)::date AS day, i.medicine_id,
               1 AS lines, i.quantity AS quantity, i.line_total AS revenue,
               i.line_total - i.vat_amount AS net, i.quantity * i.cost_at_sale AS cost,
               0 AS stock_qty, 0::numeric AS stock_value
        FROM sale_items i, w
        WHERE i.sold_at >= w.lo AND i.sold_at < w.hi AND (b IS NULL OR i.branch_id = b)
        UNION ALL
        SELECT r.branch_id, (r.issued_at AT TIME ZONE w.tz)::date, ri.medicine_id,
               1, -ri.quantity, -ri.line_total, ri.vat_amount - ri.line_total,
               CASE WHEN ri.restocked THEN -ri.quantity * i.cost_at_sale ELSE 0 END, 0, 0
        FROM sale_returns r
        JOIN sale_return_items ri ON ri.return_id = r.id
        JOIN sale_items i ON i.id = ri.sale_item_id, w
        WHERE r.status = 'issued' AND r.issued_at >= w.lo AND r.issued_at < w.hi
          AND (b IS NULL OR r.branch_id = b)
        UNION ALL
        SELECT m.branch_id, (m.created_at AT TIME ZONE w.tz)::date, m.medicine_id,
               0, 0, 0, 0, 0, m.qty,
               m.qty * batch_unit_value(bt.unit_cost, bt.received_total, bt.qty_received)
        FROM stock_movements m JOIN batches bt ON bt.id = m.batch_id, w
        WHERE m.created_at >= w.lo AND m.created_at < w.hi AND (b IS NULL OR m.branch_id = b))
    SELECT branch_id, day, medicine_id, sum(lines)::bigint, sum(quantity)::bigint, sum(revenue),
           sum(net), sum(cost), sum(stock_qty)::bigint, sum(stock_value)
    FROM rows GROUP BY branch_id, day, medicine_id
$$;

-- A sales_days row that sums to nothing (a sale and its full credit note
-- on one day net out only in money, so counts keep most rows alive).
CREATE FUNCTION sales_day_is_zero(d sales_days) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT (d.sales_count, d.returns_count, d.sale_lines, d.return_lines) = (0, 0, 0, 0)
       AND (d.sales_total, d.sales_vat, d.sales_subtotal, d.returns_total, d.returns_vat,
            d.returns_subtotal, d.taxable_0, d.taxable_std, d.line_vat, d.line_total, d.cost)
           = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
$$;

-- Recomputes the summaries of one branch (every branch when NULL) for the
-- days `from_day`..`to_day` and the whole months around them, from the
-- ledger. Rows are locked branch by branch in key order by the deletes.
CREATE FUNCTION refresh_report_summaries(b uuid, from_day date, to_day date)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    m_from date := date_trunc('month', from_day)::date;
    m_to date := (date_trunc('month', to_day) + interval '1 month' - interval '1 day')::date;
BEGIN
    DELETE FROM sales_days WHERE (b IS NULL OR branch_id = b) AND day BETWEEN from_day AND to_day;
    INSERT INTO sales_days SELECT * FROM ledger_sales_days(b, from_day, to_day);
    DELETE FROM medicine_days WHERE (b IS NULL OR branch_id = b) AND day BETWEEN m_from AND m_to;
    INSERT INTO medicine_days SELECT * FROM ledger_medicine_days(b, m_from, m_to);
    DELETE FROM medicine_months WHERE (b IS NULL OR branch_id = b) AND month BETWEEN m_from AND m_to;
    INSERT INTO medicine_months
    SELECT branch_id, date_trunc('month', day)::date, medicine_id, sum(lines), sum(quantity),
           sum(revenue), sum(net), sum(cost), sum(stock_qty), sum(stock_value)
    FROM medicine_days
    WHERE (b IS NULL OR branch_id = b) AND day BETWEEN m_from AND m_to
    GROUP BY 1, 2, 3;
END $$;

-- Every row again, from the first day the ledger knows of to the last.
CREATE FUNCTION rebuild_report_summaries() RETURNS void LANGUAGE plpgsql AS $$
DECLARE span record;
BEGIN
    DELETE FROM sales_days;
    DELETE FROM medicine_days;
    DELETE FROM medicine_months;
    SELECT * INTO span FROM ledger_span();
    PERFORM refresh_report_summaries(NULL, span.lo, span.hi);
END $$;

-- The first and last day of the ledger (today at least), and of the
-- summaries when they reach further.
CREATE FUNCTION ledger_span(OUT lo date, OUT hi date) LANGUAGE sql STABLE AS $$
    SELECT min(d), max(d)
    FROM (SELECT (t AT TIME ZONE org_time_zone())::date AS d
          FROM (SELECT min(created_at) AS t FROM sales UNION ALL SELECT max(created_at) FROM sales
                UNION ALL SELECT min(created_at) FROM stock_movements
                UNION ALL SELECT max(created_at) FROM stock_movements
                UNION ALL SELECT min(issued_at) FROM sale_returns
                UNION ALL SELECT max(issued_at) FROM sale_returns
                UNION ALL SELECT now()) x
          WHERE t IS NOT NULL
          UNION ALL SELECT min(day) FROM sales_days UNION ALL SELECT max(day) FROM sales_days
          UNION ALL SELECT min(day) FROM medicine_days UNION ALL SELECT max(day) FROM medicine_days) y
$$;

-- Where the summaries and the ledger disagree (nothing when they agree):
-- one text per differing row. Rows of zeros count as absent.
CREATE FUNCTION report_summary_differences() RETURNS SETOF text LANGUAGE sql STABLE AS $$
    WITH span AS (SELECT * FROM ledger_span()),
    sd AS (SELECT * FROM sales_days),
    sl AS (SELECT l.* FROM span, ledger_sales_days(NULL, span.lo, span.hi) l),
    md AS (SELECT * FROM medicine_days),
    ml AS (SELECT l.* FROM span, ledger_medicine_days(NULL, date_trunc('month', span.lo)::date, span.hi) l),
    mm AS (SELECT branch_id, month, medicine_id, lines, quantity, revenue, net, cost, stock_qty, stock_value
           FROM medicine_months),
    mlm AS (SELECT branch_id, date_trunc('month', day)::date AS month, medicine_id, sum(lines) AS lines,
                   sum(quantity) AS quantity, sum(revenue) AS revenue, sum(net) AS net, sum(cost) AS cost,
                   sum(stock_qty) AS stock_qty, sum(stock_value) AS stock_value
            FROM ml GROUP BY 1, 2, 3),
    s_ok AS (SELECT * FROM sd WHERE NOT sales_day_is_zero(sd)),
    l_ok AS (SELECT * FROM sl WHERE NOT sales_day_is_zero(sl)),
    md_ok AS (SELECT * FROM md WHERE (lines, quantity, stock_qty, revenue, net, cost, stock_value)
                                     <> (0, 0, 0, 0, 0, 0, 0)),
    ml_ok AS (SELECT * FROM ml WHERE (lines, quantity, stock_qty, revenue, net, cost, stock_value)
                                     <> (0, 0, 0, 0, 0, 0, 0)),
    mm_ok AS (SELECT * FROM mm WHERE (lines, quantity, stock_qty, revenue, net, cost, stock_value)
                                     <> (0, 0, 0, 0, 0, 0, 0)),
    mlm_ok AS (SELECT * FROM mlm WHERE (lines, quantity, stock_qty, revenue, net, cost, stock_value)
                                       <> (0, 0, 0, 0, 0, 0, 0))
    SELECT 'sales_days ' || x::text
    FROM ((TABLE s_ok EXCEPT TABLE l_ok) UNION ALL (TABLE l_ok EXCEPT TABLE s_ok)) x
    UNION ALL
    SELECT 'medicine_days ' || x::text
    FROM ((TABLE md_ok EXCEPT TABLE ml_ok) UNION ALL (TABLE ml_ok EXCEPT TABLE md_ok)) x
    UNION ALL
    SELECT 'medicine_months ' || x::text
    FROM ((TABLE mm_ok EXCEPT TABLE mlm_ok) UNION ALL (TABLE mlm_ok EXCEPT TABLE mm_ok)) x
$$;

-- The write path: one upsert per statement and summary.

CREATE FUNCTION summarise_new_sales() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE tz text := org_time_zone();
BEGIN
    INSERT INTO sales_days AS d (branch_id, day, method, sales_count, sales_total, sales_vat, sales_subtotal)
    SELECT branch_id, (created_at AT TIME ZONE tz)::date, payment_method, count(*), sum(total), sum(vat),
           sum(subtotal)
    FROM new_sales GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (branch_id, day, method) DO UPDATE
       SET sales_count = d.sales_count + excluded.sales_count,
           sales_total = d.sales_total + excluded.sales_total,
           sales_vat = d.sales_vat + excluded.sales_vat,
           sales_subtotal = d.sales_subtotal + excluded.sales_subtotal;
    RETURN NULL;
END $$;
CREATE TRIGGER sales_summarise AFTER INSERT ON sales
    REFERENCING NEW TABLE AS new_sales FOR EACH STATEMENT EXECUTE FUNCTION summarise_new_sales();

-- Adds signed line figures to sales_days and to both medicine summaries.
-- `lines` is what a statement's new lines (sold or credited) come to.
CREATE FUNCTION summarise_new_sale_items() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE tz text := org_time_zone();
BEGIN
    WITH l AS (
        SELECT i.branch_id, (i.sold_at AT TIME ZONE tz)::date AS day, s.payment_method AS method,
               i.medicine_id, i.quantity, i.line_total, i.vat_amount, i.vat_rate,
               i.quantity * i.cost_at_sale AS cost
        FROM new_items i JOIN sales s ON s.id = i.sale_id),
    per_method AS (
        INSERT INTO sales_days AS d (branch_id, day, method, sale_lines, taxable_0, taxable_std, line_vat,
                                     line_total, cost)
        SELECT branch_id, day, method, count(*),
               coalesce(sum(line_total - vat_amount) FILTER (WHERE vat_rate = 0), 0),
               coalesce(sum(line_total - vat_amount) FILTER (WHERE vat_rate > 0), 0),
               sum(vat_amount), sum(line_total), sum(cost)
        FROM l GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (branch_id, day, method) DO UPDATE
           SET sale_lines = d.sale_lines + excluded.sale_lines,
               taxable_0 = d.taxable_0 + excluded.taxable_0,
               taxable_std = d.taxable_std + excluded.taxable_std,
               line_vat = d.line_vat + excluded.line_vat,
               line_total = d.line_total + excluded.line_total,
               cost = d.cost + excluded.cost),
    per_day AS (
        INSERT INTO medicine_days AS d (branch_id, day, medicine_id, lines, quantity, revenue, net, cost)
        SELECT branch_id, day, medicine_id, count(*), sum(quantity), sum(line_total),
               sum(line_total - vat_amount), sum(cost)
        FROM l GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (branch_id, day, medicine_id) DO UPDATE
           SET lines = d.lines + excluded.lines, quantity = d.quantity + excluded.quantity,
               revenue = d.revenue + excluded.revenue, net = d.net + excluded.net,
               cost = d.cost + excluded.cost)
    INSERT INTO medicine_months AS d (branch_id, month, medicine_id, lines, quantity, revenue, net, cost)
    SELECT branch_id, date_trunc('month', day)::date, medicine_id, count(*), sum(quantity), sum(line_total),
           sum(line_total - vat_amount), sum(cost)
    FROM l GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (branch_id, month, medicine_id) DO UPDATE
       SET lines = d.lines + excluded.lines, quantity = d.quantity + excluded.quantity,
           revenue = d.revenue + excluded.revenue, net = d.net + excluded.net,
           cost = d.cost + excluded.cost;
    RETURN NULL;
END $$;
CREATE TRIGGER sale_items_summarise AFTER INSERT ON sale_items
    REFERENCING NEW TABLE AS new_items FOR EACH STATEMENT EXECUTE FUNCTION summarise_new_sale_items();

CREATE FUNCTION summarise_new_stock_movements() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE tz text := org_time_zone();
BEGIN
    WITH m AS (
        SELECT m.branch_id, (m.created_at AT TIME ZONE tz)::date AS day, m.medicine_id, m.qty,
               m.qty * batch_unit_value(b.unit_cost, b.received_total, b.qty_received) AS value
        FROM new_movements m JOIN batches b ON b.id = m.batch_id),
    per_day AS (
        INSERT INTO medicine_days AS d (branch_id, day, medicine_id, stock_qty, stock_value)
        SELECT branch_id, day, medicine_id, sum(qty), sum(value)
        FROM m GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (branch_id, day, medicine_id) DO UPDATE
           SET stock_qty = d.stock_qty + excluded.stock_qty,
               stock_value = d.stock_value + excluded.stock_value)
    INSERT INTO medicine_months AS d (branch_id, month, medicine_id, stock_qty, stock_value)
    SELECT branch_id, date_trunc('month', day)::date, medicine_id, sum(qty), sum(value)
    FROM m GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (branch_id, month, medicine_id) DO UPDATE
       SET stock_qty = d.stock_qty + excluded.stock_qty,
           stock_value = d.stock_value + excluded.stock_value;
    RETURN NULL;
END $$;
CREATE TRIGGER stock_movements_summarise AFTER INSERT ON stock_movements
    REFERENCING NEW TABLE AS new_movements FOR EACH STATEMENT
    EXECUTE FUNCTION summarise_new_stock_movements();

-- Credit notes count on the day they are issued. A note issued at once
-- gets its lines after its header (the lines' trigger sums them); a note
-- that waited for approval is issued by an update, which recomputes that
-- branch and day.
CREATE FUNCTION summarise_new_returns() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE tz text := org_time_zone();
BEGIN
    INSERT INTO sales_days AS d (branch_id, day, method, returns_count, returns_total, returns_vat,
                                 returns_subtotal)
    SELECT branch_id, (issued_at AT TIME ZONE tz)::date, refund_method, count(*), sum(total), sum(vat),
           sum(subtotal)
    FROM new_returns WHERE status = 'issued' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (branch_id, day, method) DO UPDATE
       SET returns_count = d.returns_count + excluded.returns_count,
           returns_total = d.returns_total + excluded.returns_total,
           returns_vat = d.returns_vat + excluded.returns_vat,
           returns_subtotal = d.returns_subtotal + excluded.returns_subtotal;
    RETURN NULL;
END $$;
CREATE TRIGGER sale_returns_summarise AFTER INSERT ON sale_returns
    REFERENCING NEW TABLE AS new_returns FOR EACH STATEMENT EXECUTE FUNCTION summarise_new_returns();

CREATE FUNCTION summarise_new_return_items() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE tz text := org_time_zone();
BEGIN
    WITH l AS (
        SELECT r.branch_id, (r.issued_at AT TIME ZONE tz)::date AS day, r.refund_method AS method,
               ri.medicine_id, ri.quantity, ri.line_total, ri.vat_amount, ri.vat_rate,
               CASE WHEN ri.restocked THEN ri.quantity * i.cost_at_sale ELSE 0 END AS cost
        FROM new_items ri
        JOIN sale_returns r ON r.id = ri.return_id AND r.status = 'issued'
        JOIN sale_items i ON i.id = ri.sale_item_id),
    per_method AS (
        INSERT INTO sales_days AS d (branch_id, day, method, return_lines, taxable_0, taxable_std, line_vat,
                                     line_total, cost)
        SELECT branch_id, day, method, count(*),
               -coalesce(sum(line_total - vat_amount) FILTER (WHERE vat_rate = 0), 0),
               -coalesce(sum(line_total - vat_amount) FILTER (WHERE vat_rate > 0), 0),
               -sum(vat_amount), -sum(line_total), -sum(cost)
        FROM l GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (branch_id, day, method) DO UPDATE
           SET return_lines = d.return_lines + excluded.return_lines,
               taxable_0 = d.taxable_0 + excluded.taxable_0,
               taxable_std = d.taxable_std + excluded.taxable_std,
               line_vat = d.line_vat + excluded.line_vat,
               line_total = d.line_total + excluded.line_total,
               cost = d.cost + excluded.cost),
    per_day AS (
        INSERT INTO medicine_days AS d (branch_id, day, medicine_id, lines, quantity, revenue, net, cost)
        SELECT branch_id, day, medicine_id, count(*), -sum(quantity), -sum(line_total),
               -sum(line_total - vat_amount), -sum(cost)
        FROM l GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (branch_id, day, medicine_id) DO UPDATE
           SET lines = d.lines + excluded.lines, quantity = d.quantity + excluded.quantity,
               revenue = d.revenue + excluded.revenue, net = d.net + excluded.net,
               cost = d.cost + excluded.cost)
    INSERT INTO medicine_months AS d (branch_id, month, medicine_id, lines, quantity, revenue, net, cost)
    SELECT branch_id, date_trunc('month', day)::date, medicine_id, count(*), -sum(quantity),
           -sum(line_total), -sum(line_total - vat_amount), -sum(cost)
    FROM l GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (branch_id, month, medicine_id) DO UPDATE
       SET lines = d.lines + excluded.lines, quantity = d.quantity + excluded.quantity,
           revenue = d.revenue + excluded.revenue, net = d.net + excluded.net,
           cost = d.cost + excluded.cost;
    RETURN NULL;
END $$;
CREATE TRIGGER sale_return_items_summarise AFTER INSERT ON sale_return_items
    REFERENCING NEW TABLE AS new_items FOR EACH STATEMENT EXECUTE FUNCTION summarise_new_return_items();

-- Rows already summed that change: recompute the branch and days they
-- counted on before and after (rare: approvals, moves, corrections).
CREATE FUNCTION refresh_summaries_of_changed_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tz text := org_time_zone();
    old_day date;
    new_day date;
BEGIN
    IF TG_TABLE_NAME = 'sale_returns' THEN
        old_day := (coalesce(OLD.issued_at, NEW.issued_at, now()) AT TIME ZONE tz)::date;
        new_day := (coalesce(NEW.issued_at, OLD.issued_at, now()) AT TIME ZONE tz)::date;
    ELSIF TG_TABLE_NAME = 'sale_items' THEN
        old_day := (OLD.sold_at AT TIME ZONE tz)::date;
        new_day := (NEW.sold_at AT TIME ZONE tz)::date;
    ELSE
        old_day := (OLD.created_at AT TIME ZONE tz)::date;
        new_day := (NEW.created_at AT TIME ZONE tz)::date;
    END IF;
    PERFORM refresh_report_summaries(OLD.branch_id, old_day, old_day);
    IF (NEW.branch_id, new_day) IS DISTINCT FROM (OLD.branch_id, old_day) THEN
        PERFORM refresh_report_summaries(NEW.branch_id, new_day, new_day);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER sales_resummarise AFTER UPDATE ON sales FOR EACH ROW
    WHEN ((OLD.branch_id, OLD.created_at, OLD.payment_method, OLD.total, OLD.vat, OLD.subtotal)
          IS DISTINCT FROM (NEW.branch_id, NEW.created_at, NEW.payment_method, NEW.total, NEW.vat, NEW.subtotal))
    EXECUTE FUNCTION refresh_summaries_of_changed_row();
CREATE TRIGGER sale_items_resummarise AFTER UPDATE ON sale_items FOR EACH ROW
    WHEN ((OLD.branch_id, OLD.sold_at, OLD.medicine_id, OLD.quantity, OLD.line_total, OLD.vat_amount,
           OLD.vat_rate, OLD.cost_at_sale)
          IS DISTINCT FROM (NEW.branch_id, NEW.sold_at, NEW.medicine_id, NEW.quantity, NEW.line_total,
                            NEW.vat_amount, NEW.vat_rate, NEW.cost_at_sale))
    EXECUTE FUNCTION refresh_summaries_of_changed_row();
CREATE TRIGGER sale_returns_resummarise AFTER UPDATE ON sale_returns FOR EACH ROW
    WHEN ((OLD.status = 'issued' OR NEW.status = 'issued')
          AND (OLD.status, OLD.branch_id, OLD.issued_at, OLD.refund_method, OLD.total, OLD.vat, OLD.subtotal)
              IS DISTINCT FROM (NEW.status, NEW.branch_id, NEW.issued_at, NEW.refund_method, NEW.total,
                                NEW.vat, NEW.subtotal))
    EXECUTE FUNCTION refresh_summaries_of_changed_row();
CREATE TRIGGER stock_movements_resummarise AFTER UPDATE ON stock_movements FOR EACH ROW
    WHEN ((OLD.branch_id, OLD.created_at, OLD.medicine_id, OLD.batch_id, OLD.qty)
          IS DISTINCT FROM (NEW.branch_id, NEW.created_at, NEW.medicine_id, NEW.batch_id, NEW.qty))
    EXECUTE FUNCTION refresh_summaries_of_changed_row();

-- A batch whose unit value changes (a delivery merged onto it at a
-- slightly different share of its total) re-values every unit it ever
-- moved: the difference per day and month it moved stock.
CREATE FUNCTION revalue_batch_movements() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tz text := org_time_zone();
    diff numeric := batch_unit_value(NEW.unit_cost, NEW.received_total, NEW.qty_received)
                    - batch_unit_value(OLD.unit_cost, OLD.received_total, OLD.qty_received);
BEGIN
    WITH m AS (
        SELECT branch_id, (created_at AT TIME ZONE tz)::date AS day, medicine_id, qty * diff AS value
        FROM stock_movements WHERE batch_id = NEW.id),
    per_day AS (
        UPDATE medicine_days d SET stock_value = d.stock_value + x.value
        FROM (SELECT branch_id, day, medicine_id, sum(value) AS value FROM m GROUP BY 1, 2, 3) x
        WHERE (d.branch_id, d.day, d.medicine_id) = (x.branch_id, x.day, x.medicine_id))
    UPDATE medicine_months d SET stock_value = d.stock_value + x.value
    FROM (SELECT branch_id, date_trunc('month', day)::date AS month, medicine_id, sum(value) AS value
          FROM m GROUP BY 1, 2, 3) x
    WHERE (d.branch_id, d.month, d.medicine_id) = (x.branch_id, x.month, x.medicine_id);
    RETURN NULL;
END $$;
CREATE TRIGGER batches_revalue AFTER UPDATE OF unit_cost, received_total, qty_received ON batches
    FOR EACH ROW
    WHEN (batch_unit_value(OLD.unit_cost, OLD.received_total, OLD.qty_received)
          IS DISTINCT FROM batch_unit_value(NEW.unit_cost, NEW.received_total, NEW.qty_received))
    EXECUTE FUNCTION revalue_batch_movements();

-- Days are the organisation's: a new time zone moves every row.
CREATE FUNCTION rebuild_summaries_for_time_zone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM rebuild_report_summaries();
    RETURN NULL;
END $$;
CREATE TRIGGER settings_time_zone_resummarise AFTER UPDATE OF time_zone ON settings FOR EACH ROW
    WHEN (OLD.time_zone IS DISTINCT FROM NEW.time_zone)
    EXECUTE FUNCTION rebuild_summaries_for_time_zone();
-- Before the first settings row the zone is the default one.
CREATE TRIGGER settings_first_time_zone_resummarise AFTER INSERT ON settings FOR EACH ROW
    WHEN (NEW.time_zone IS DISTINCT FROM 'Africa/Kampala')
    EXECUTE FUNCTION rebuild_summaries_for_time_zone();

SELECT rebuild_report_summaries();

-- What the reports read. Marked parallel safe (like everything they
-- call) so a year of the chain is summed by parallel workers.

-- The first day of the first calendar month that starts on or after `d`.
CREATE FUNCTION whole_months_from(d date) RETURNS date LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN extract(day FROM d) = 1 THEN d
                ELSE (date_trunc('month', d) + interval '1 month')::date END
$$;

-- The last day of the last calendar month that ends on or before `d`.
CREATE FUNCTION whole_months_to(d date) RETURNS date LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN extract(day FROM d + 1) = 1 THEN d
                ELSE (date_trunc('month', d) - interval '1 day')::date END
$$;

-- Lines sold less lines credited per medicine over `from_day`..`to_day`:
-- whole calendar months from medicine_months, the days around them from
-- medicine_days (a year is at most twelve month rows and two part months
-- of day rows per medicine and branch).
CREATE FUNCTION medicine_sales(b uuid, from_day date, to_day date)
    RETURNS TABLE (medicine_id uuid, lines bigint, quantity bigint, revenue numeric, net numeric,
                   cost numeric)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT x.medicine_id, sum(x.lines)::bigint, sum(x.quantity)::bigint, sum(x.revenue), sum(x.net),
           sum(x.cost)
    FROM (SELECT mm.medicine_id, mm.lines, mm.quantity, mm.revenue, mm.net, mm.cost
          FROM medicine_months mm
          WHERE mm.month >= whole_months_from(from_day) AND mm.month <= whole_months_to(to_day)
            AND (b IS NULL OR mm.branch_id = b)
          UNION ALL
          SELECT md.medicine_id, md.lines, md.quantity, md.revenue, md.net, md.cost
          FROM medicine_days md
          WHERE md.day >= from_day AND md.day <= to_day
            AND (md.day < whole_months_from(from_day) OR md.day > whole_months_to(to_day))
            AND (b IS NULL OR md.branch_id = b)) x
    GROUP BY x.medicine_id
    HAVING sum(x.lines) > 0
$$;

-- The valuation's two reads of batches: those holding stock now (valued
-- from the index alone), and those that may be expired or held back on a
-- day (by expiry, or quarantined or recalled now).
CREATE INDEX batches_valuation_idx ON batches (branch_id)
    INCLUDE (medicine_id, qty_remaining, unit_cost, received_total, qty_received)
    WHERE qty_remaining > 0;
CREATE INDEX batches_expiry_idx ON batches (expiry_date);
CREATE INDEX batches_held_back_idx ON batches (branch_id)
    WHERE regulator_status IN ('quarantined', 'recalled');

-- Stock moved after the end of `as_of` per branch and medicine (units and
-- value): the rest of that day's month from medicine_days, later months
-- from medicine_months. Stock then = stock now − this.
CREATE FUNCTION medicine_stock_moved_after(b uuid, as_of date)
    RETURNS TABLE (branch_id uuid, medicine_id uuid, qty bigint, value numeric)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT x.branch_id, x.medicine_id, sum(x.qty)::bigint, sum(x.value)
    FROM (SELECT md.branch_id, md.medicine_id, md.stock_qty AS qty, md.stock_value AS value
          FROM medicine_days md
          WHERE md.day > as_of
            AND md.day < (date_trunc('month', as_of) + interval '1 month')::date
            AND (b IS NULL OR md.branch_id = b)
          UNION ALL
          SELECT mm.branch_id, mm.medicine_id, mm.stock_qty, mm.stock_value
          FROM medicine_months mm
          WHERE mm.month > as_of AND (b IS NULL OR mm.branch_id = b)) x
    GROUP BY x.branch_id, x.medicine_id
$$;
