-- Chain-wide month rows for the months that are over (see "Report
-- summaries" in docs/performance.md).
--
-- The chain's year of top sellers or margins by medicine summed
-- `medicine_months` for every branch: about 20,000 rows a month for 20
-- branches and 1,000 medicines. A chain-level row per medicine and month
-- written by the sales themselves would make every branch wait on every
-- other's row. Instead a month is rolled up once it is over:
--   chain_months          the months rolled up (a row per month);
--   medicine_chain_months their sums over branches, per medicine.
-- Nothing on the write path writes them. A change to a month that is over
-- (a till's offline sale pushed late, a credit note approved later, a
-- batch revalued, a rebuild) forgets that month's roll-up in the same
-- transaction, through a statement trigger on `medicine_months`; the
-- reports then read that month from `medicine_months` until it is rolled
-- up again. So a roll-up is either absent or equal to its month's rows.
--
-- Roll-ups are built by `roll_up_chain_months()`, which every service
-- process calls every few minutes (and the rebuild calls). It only takes
-- months that ended more than an hour ago: a transaction that began while
-- its month was still open could not forget the roll-up when it wrote
-- (it saw the month as open), and no transaction of the service lasts an
-- hour. A builder and a forgetter of one month serialise on an advisory
-- lock of that month, so a roll-up never misses a write committed before
-- it, and a write committed after it always forgets it.

CREATE TABLE chain_months (
    month      date PRIMARY KEY CHECK (extract(day FROM month) = 1),
    rolled_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE medicine_chain_months (
    month        date NOT NULL REFERENCES chain_months (month) ON DELETE CASCADE,
    medicine_id  uuid NOT NULL,
    lines        bigint NOT NULL,
    quantity     bigint NOT NULL,
    revenue      numeric NOT NULL,
    net          numeric NOT NULL,
    cost         numeric NOT NULL,
    stock_qty    bigint NOT NULL,
    stock_value  numeric NOT NULL,
    PRIMARY KEY (month, medicine_id)
);

-- The advisory lock of one month's roll-up: (class, days since 2000).
CREATE FUNCTION chain_month_lock(m date) RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtext('chain_months'), m - date '2000-01-01')
$$;

-- The first day of the month that is open now (the organisation's).
CREATE FUNCTION open_month() RETURNS date LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT date_trunc('month', now() AT TIME ZONE org_time_zone())::date
$$;

-- Forgets the roll-ups of the months a statement on medicine_months
-- changed, when they are over. Months are locked in order, so two writers
-- of several months cannot deadlock on them.
CREATE FUNCTION forget_chain_months() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE m date;
BEGIN
    FOR m IN SELECT DISTINCT c.month FROM changed c WHERE c.month < open_month() ORDER BY 1 LOOP
        PERFORM chain_month_lock(m);
        DELETE FROM chain_months WHERE month = m;
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER medicine_months_forget_inserted AFTER INSERT ON medicine_months
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION forget_chain_months();
CREATE TRIGGER medicine_months_forget_updated AFTER UPDATE ON medicine_months
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION forget_chain_months();
CREATE TRIGGER medicine_months_forget_deleted AFTER DELETE ON medicine_months
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION forget_chain_months();

-- Rolls up the months over for more than an hour that are not rolled up;
-- how many it rolled up. A month another process is rolling up, or a
-- writer is changing, is left for the next call.
CREATE FUNCTION roll_up_chain_months() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    closed_before date := date_trunc('month', (now() - interval '1 hour') AT TIME ZONE org_time_zone())::date;
    first_month date := (SELECT min(month) FROM medicine_months);
    m date;
    built integer := 0;
BEGIN
    IF first_month IS NULL THEN
        RETURN 0;
    END IF;
    FOR m IN SELECT g::date FROM generate_series(first_month, closed_before - 1, interval '1 month') g
             WHERE NOT EXISTS (SELECT 1 FROM chain_months c WHERE c.month = g::date) ORDER BY 1 LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext('chain_months'), m - date '2000-01-01');
        -- Another process may have rolled it up since the list was read.
        CONTINUE WHEN EXISTS (SELECT 1 FROM chain_months WHERE month = m);
        INSERT INTO chain_months (month) VALUES (m);
        INSERT INTO medicine_chain_months
        SELECT m, medicine_id, sum(lines), sum(quantity), sum(revenue), sum(net), sum(cost),
               sum(stock_qty), sum(stock_value)
        FROM medicine_months WHERE month = m
        GROUP BY medicine_id;
        built := built + 1;
    END LOOP;
    RETURN built;
END $$;

-- Roll-ups that differ from their months' rows (nothing when all agree).
CREATE FUNCTION chain_month_differences() RETURNS SETOF text LANGUAGE sql STABLE AS $$
    WITH want AS (
        SELECT mm.month, mm.medicine_id, sum(mm.lines) AS lines, sum(mm.quantity) AS quantity,
               sum(mm.revenue) AS revenue, sum(mm.net) AS net, sum(mm.cost) AS cost,
               sum(mm.stock_qty) AS stock_qty, sum(mm.stock_value) AS stock_value
        FROM medicine_months mm JOIN chain_months c ON c.month = mm.month
        GROUP BY 1, 2)
    SELECT format('chain month %s, medicine %s: rolled up %s, months hold %s',
                  coalesce(h.month, w.month), coalesce(h.medicine_id, w.medicine_id),
                  CASE WHEN h.month IS NULL THEN 'nothing'
                       ELSE format('%s lines %s units %s revenue %s cost %s stock units %s stock value',
                                   h.lines, h.quantity, h.revenue, h.cost, h.stock_qty, h.stock_value) END,
                  CASE WHEN w.month IS NULL THEN 'nothing'
                       ELSE format('%s lines %s units %s revenue %s cost %s stock units %s stock value',
                                   w.lines, w.quantity, w.revenue, w.cost, w.stock_qty, w.stock_value) END)
    FROM medicine_chain_months h
    FULL JOIN want w ON (w.month, w.medicine_id) = (h.month, h.medicine_id)
    WHERE (h.lines, h.quantity, h.revenue, h.net, h.cost, h.stock_qty, h.stock_value)
          IS DISTINCT FROM (w.lines, w.quantity, w.revenue, w.net, w.cost, w.stock_qty, w.stock_value)
$$;

-- The whole calendar months of a window that are not rolled up: the ones
-- the chain-wide reads take from medicine_months.
CREATE FUNCTION unrolled_months(from_month date, to_month date) RETURNS date[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(g::date), '{}')
    FROM generate_series(from_month, to_month, interval '1 month') g
    WHERE NOT EXISTS (SELECT 1 FROM chain_months c WHERE c.month = g::date)
$$;

-- The last day of the whole months a window ending on `to_day` reads
-- from month rows: as whole_months_to, and also to_day's own month when
-- nothing of it lies after to_day (a window that ends today: the month so
-- far is the month's row), so today's window reads no day rows of its
-- month at all.
CREATE FUNCTION whole_months_read_to(b uuid, to_day date) RETURNS date
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN NOT EXISTS (
                    SELECT 1 FROM medicine_days md
                    WHERE md.day > to_day
                      AND md.day < (date_trunc('month', to_day) + interval '1 month')::date
                      AND (b IS NULL OR md.branch_id = b))
                THEN (date_trunc('month', to_day) + interval '1 month' - interval '1 day')::date
                ELSE whole_months_to(to_day) END
$$;

-- As in 0029, with the chain-wide reads (`b` NULL) taking rolled-up months
-- from medicine_chain_months: a year of the chain reads one row per
-- medicine and month over, every branch's month rows only for the months
-- not rolled up (the open one), and day rows only for the part month
-- before the window's first whole month. The window's last month is read
-- whole when nothing of it lies after the window (whole_months_read_to,
-- computed once per query).
CREATE OR REPLACE FUNCTION medicine_sales(b uuid, from_day date, to_day date)
    RETURNS TABLE (medicine_id uuid, lines bigint, quantity bigint, revenue numeric, net numeric,
                   cost numeric)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT x.medicine_id, sum(x.lines)::bigint, sum(x.quantity)::bigint, sum(x.revenue), sum(x.net),
           sum(x.cost)
    FROM (SELECT mc.medicine_id, mc.lines, mc.quantity, mc.revenue, mc.net, mc.cost
          FROM medicine_chain_months mc
          WHERE b IS NULL
            AND mc.month >= whole_months_from(from_day)
            AND mc.month <= (SELECT whole_months_read_to(b, to_day))
          UNION ALL
          SELECT mm.medicine_id, mm.lines, mm.quantity, mm.revenue, mm.net, mm.cost
          FROM medicine_months mm
          WHERE b IS NULL
            AND mm.month = ANY (unrolled_months(whole_months_from(from_day),
                                                (SELECT whole_months_read_to(b, to_day))))
          UNION ALL
          SELECT mm.medicine_id, mm.lines, mm.quantity, mm.revenue, mm.net, mm.cost
          FROM medicine_months mm
          WHERE mm.branch_id = b
            AND mm.month >= whole_months_from(from_day)
            AND mm.month <= (SELECT whole_months_read_to(b, to_day))
          UNION ALL
          SELECT md.medicine_id, md.lines, md.quantity, md.revenue, md.net, md.cost
          FROM medicine_days md
          WHERE md.day >= from_day AND md.day <= to_day
            AND (md.day < whole_months_from(from_day)
                 OR md.day > (SELECT whole_months_read_to(b, to_day)))
            AND (b IS NULL OR md.branch_id = b)) x
    GROUP BY x.medicine_id
    HAVING sum(x.lines) > 0
$$;

-- As in 0029; chain-wide, the rolled-up months after `as_of` come from
-- medicine_chain_months with no branch (the valuation sums by medicine).
CREATE OR REPLACE FUNCTION medicine_stock_moved_after(b uuid, as_of date)
    RETURNS TABLE (branch_id uuid, medicine_id uuid, qty bigint, value numeric)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT x.branch_id, x.medicine_id, sum(x.qty)::bigint, sum(x.value)
    FROM (SELECT md.branch_id, md.medicine_id, md.stock_qty AS qty, md.stock_value AS value
          FROM medicine_days md
          WHERE md.day > as_of
            AND md.day < (date_trunc('month', as_of) + interval '1 month')::date
            AND (b IS NULL OR md.branch_id = b)
          UNION ALL
          SELECT NULL::uuid, mc.medicine_id, mc.stock_qty, mc.stock_value
          FROM medicine_chain_months mc
          WHERE b IS NULL AND mc.month > as_of
          UNION ALL
          SELECT mm.branch_id, mm.medicine_id, mm.stock_qty, mm.stock_value
          FROM medicine_months mm
          WHERE b IS NULL
            AND mm.month = ANY (unrolled_months(
                    (date_trunc('month', as_of) + interval '1 month')::date,
                    greatest(open_month(), (SELECT max(l.month) FROM medicine_months l))))
          UNION ALL
          SELECT mm.branch_id, mm.medicine_id, mm.stock_qty, mm.stock_value
          FROM medicine_months mm
          WHERE mm.month > as_of AND mm.branch_id = b) x
    GROUP BY x.branch_id, x.medicine_id
$$;

-- A rebuild (a new time zone moves every day) rolls the months up again
-- at once.
CREATE OR REPLACE FUNCTION rebuild_report_summaries() RETURNS void LANGUAGE plpgsql AS $$
DECLARE span record;
BEGIN
    DELETE FROM sales_days;
    DELETE FROM medicine_days;
    DELETE FROM medicine_months;
    SELECT * INTO span FROM ledger_span();
    PERFORM refresh_report_summaries(NULL, span.lo, span.hi);
    PERFORM roll_up_chain_months();
END $$;

SELECT roll_up_chain_months();
