-- A refresh of the report summaries that another process's writer cannot
-- make fail (see "Report summaries" in docs/performance.md).
--
-- `refresh_report_summaries` (0029) deletes a branch's rows for some days
-- and inserts what the ledger says, in separate statements so the insert
-- reads the ledger after every writer its delete waited for. A writer of
-- the same branch and days in another process that commits a row for a
-- new key between the two statements (its sale or movement invisible to
-- the delete, visible to the insert) made the insert fail with a duplicate
-- key, and the approval or correction that refreshed with it answered 409.
-- The writer itself never fails: its upserts wait for the refresh's rows.
--
-- The refresh now runs in a block that is undone on a duplicate key and
-- run again: the delete then sees the writer's committed rows. The retry
-- cannot loop for ever in practice (each retry needs another new key
-- committed in that window), and gives up after ten.
CREATE OR REPLACE FUNCTION refresh_report_summaries(b uuid, from_day date, to_day date)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    m_from date := date_trunc('month', from_day)::date;
    m_to date := (date_trunc('month', to_day) + interval '1 month' - interval '1 day')::date;
    attempt integer := 1;
BEGIN
    LOOP
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
            RETURN;
        EXCEPTION WHEN unique_violation THEN
            IF attempt >= 10 THEN
                RAISE;
            END IF;
            attempt := attempt + 1;
        END;
    END LOOP;
END $$;
