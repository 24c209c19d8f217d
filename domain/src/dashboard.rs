//! Dashboard figures: today's takings against yesterday, a 30-day revenue
//! sparkline, stock and expiry counts, and the branch comparison. Every
//! figure is aggregated by PostgreSQL; days are the organisation's calendar
//! days (`settings.time_zone`).

use std::collections::HashMap;

use chrono::{Datelike, Duration, NaiveDate};
use deadpool_postgres::GenericClient;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::replica::Reads;
use crate::reports::{self, decimal_num, ratio_pct, Scope};
use crate::window::{DateWindow, ReportWindow};
use crate::{db, wire, Result};
use deadpool_postgres::Object;

/// A connection for the dashboard's reads: its figures may be a few seconds
/// old, so they read from the streaming standby while it is within its lag
/// bound, else from the primary. The API and the console both connect here,
/// so both read the same place.
pub async fn connect(reads: &Reads<'_>) -> Result<Object> {
    reads.standby().await
}

/// Days in the sparkline (the spec's Limits).
pub const SPARKLINE_DAYS: i64 = 30;

#[derive(Debug, Serialize, ToSchema)]
pub struct Summary {
    /// The branch the figures are for; `null` for the whole organisation.
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// The organisation's today (`YYYY-MM-DD`, `settings.time_zone`).
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    pub today_sales_count: i64,
    /// Today's sales less today's credit notes (VAT included).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub today_revenue: Decimal,
    /// Today's VAT less the VAT of today's credit notes.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub today_vat: Decimal,
    /// Credit notes issued today (already taken off the revenue figures).
    pub returns_count: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub returns_total: Decimal,
    /// Percent change of today's revenue against yesterday's, one decimal;
    /// 0 when yesterday had no revenue.
    #[serde(serialize_with = "decimal_num")]
    #[schema(value_type = f64)]
    pub revenue_trend: Decimal,
    /// Revenue (net of credit notes) of each of the last 30 days, oldest
    /// first, ending today.
    #[schema(value_type = Vec<f64>)]
    #[serde(serialize_with = "money_list")]
    pub sparkline_30d: Vec<Decimal>,
    /// Active medicines with 0 < stock <= their low-stock threshold.
    pub low_stock_count: i64,
    /// Active medicines with no stock (never also counted as low).
    pub out_of_stock_count: i64,
    /// Batches with stock expiring today or within 90 days (includes the 30-day ones).
    pub expiring_90_count: i64,
    /// Batches with stock expiring today or within 30 days.
    pub expiring_30_count: i64,
    /// Batches with stock whose expiry date has passed.
    pub expired_count: i64,
    /// Active, not deleted medicines of the catalogue.
    pub total_medicines: i64,
    /// Stock on hand valued at batch cost (decimal string); null for roles
    /// that may not read stock value.
    #[serde(serialize_with = "wire::money_str_opt")]
    #[schema(value_type = Option<String>)]
    pub stock_value: Option<Decimal>,
    /// This month's gross margin so far (`/reports/margins` from the
    /// month's first day to today); null as `stock_value`.
    #[serde(serialize_with = "wire::money_str_opt")]
    #[schema(value_type = Option<String>)]
    pub month_gross_margin: Option<Decimal>,
}

fn money_list<S: serde::Serializer>(v: &[Decimal], s: S) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for d in v {
        seq.serialize_element(&wire::two_places(*d).to_f64().unwrap_or_default())?;
    }
    seq.end()
}

/// Revenue, VAT and sale count of one organisation day.
#[derive(Default, Clone, Copy)]
struct Day {
    count: i64,
    /// Sales less credit notes.
    revenue: Decimal,
    vat: Decimal,
    returns_count: i64,
    returns_total: Decimal,
}

/// The summary for `branch` (`None`: every branch) over `days`, the
/// 30 days ending today; with the stock value and this month's margin
/// when `worth` (the caller may read them).
pub async fn summary<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
    days: &ReportWindow,
    worth: bool,
) -> Result<Summary> {
    let by_day = daily(c, branch, days).await?;
    let today = days.to;
    let day = |d: NaiveDate| by_day.get(&d).copied().unwrap_or_default();
    let (now, before) = (day(today), day(today - Duration::days(1)));
    let sparkline = (0..SPARKLINE_DAYS)
        .rev()
        .map(|back| day(today - Duration::days(back)).revenue)
        .collect();
    let stock = stock_counts(c, branch).await?;
    let expiry = expiry_counts(c, branch, today).await?;
    let (stock_value, month_gross_margin) = match worth {
        true => {
            let (v, m) = value_and_margin(c, branch, today).await?;
            (Some(v), Some(m))
        }
        false => (None, None),
    };
    Ok(Summary {
        branch_id: branch,
        date: today,
        today_sales_count: now.count,
        today_revenue: now.revenue,
        today_vat: now.vat,
        returns_count: now.returns_count,
        returns_total: now.returns_total,
        revenue_trend: ratio_pct(now.revenue - before.revenue, before.revenue),
        sparkline_30d: sparkline,
        low_stock_count: stock.0,
        out_of_stock_count: stock.1,
        total_medicines: stock.2,
        expiring_90_count: expiry.0,
        expiring_30_count: expiry.1,
        expired_count: expiry.2,
        stock_value,
        month_gross_margin,
    })
}

/// Stock on hand at batch cost, and the gross margin from the first of
/// `today`'s month to `today`.
async fn value_and_margin<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
    today: NaiveDate,
) -> Result<(Decimal, Decimal)> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT coalesce(sum(batch_value(qty_remaining, unit_cost, received_total, qty_received)), 0)
           FROM batches
           WHERE qty_remaining > 0 AND NOT is_deleted
             AND ({branch}::uuid IS NULL OR branch_id = {branch})"#
    );
    let value: Decimal = db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| r.get(0))
        .unwrap_or_default();
    let first = today.with_day(1).unwrap_or(today);
    let month = DateWindow::optional(Some(first), Some(today))?
        .or_last_days(c, 31)
        .await?;
    let scope = Scope {
        window: &month,
        branch,
    };
    let margins = reports::margins(c, &scope, "day").await?;
    Ok((value, margins.totals.gross_margin))
}

/// Sales less credit notes per organisation day in the window (days
/// without either are absent).
async fn daily<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
    w: &ReportWindow,
) -> Result<HashMap<NaiveDate, Day>> {
    let (start, end, tz) = (w.start, w.end, w.tz.clone());
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT day, sum(n)::bigint, sum(revenue), sum(vat), sum(returns_n)::bigint,
                  sum(returns_total)
           FROM (SELECT (s.created_at AT TIME ZONE {tz})::date AS day, count(*) AS n,
                        coalesce(sum(s.total), 0) AS revenue, coalesce(sum(s.vat), 0) AS vat,
                        0 AS returns_n, 0 AS returns_total
                 FROM sales s
                 WHERE s.created_at >= {start} AND s.created_at < {end}
                   AND ({branch}::uuid IS NULL OR s.branch_id = {branch})
                 GROUP BY 1
                 UNION ALL
                 SELECT (r.issued_at AT TIME ZONE {tz})::date, 0, -sum(r.total), -sum(r.vat),
                        count(*), sum(r.total)
                 FROM sale_returns r
                 WHERE r.status = 'issued' AND r.issued_at >= {start} AND r.issued_at < {end}
                   AND ({branch}::uuid IS NULL OR r.branch_id = {branch})
                 GROUP BY 1) d
           GROUP BY day"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let day = Day {
                count: r.get(1),
                revenue: r.get(2),
                vat: r.get(3),
                returns_count: r.get(4),
                returns_total: r.get(5),
            };
            (r.get(0), day)
        })
        .collect())
}

/// (low, out of stock, total) over active medicines. Stock is the sum of
/// the scope's batches, as in `GET /medicines` (empty batches add nothing,
/// and skipping them lets the partial index answer).
async fn stock_counts<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
) -> Result<(i64, i64, i64)> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT count(*) FILTER (WHERE coalesce(st.qty, 0) > 0
                                     AND coalesce(st.qty, 0) <= m.low_stock_threshold),
                  count(*) FILTER (WHERE coalesce(st.qty, 0) <= 0),
                  count(*)
           FROM medicines m
           LEFT JOIN (SELECT medicine_id, sum(qty_remaining) AS qty FROM batches
                      WHERE qty_remaining > 0 AND NOT is_deleted
                        AND ({branch}::uuid IS NULL OR branch_id = {branch})
                      GROUP BY medicine_id) st ON st.medicine_id = m.id
           WHERE m.is_active AND NOT m.is_deleted"#
    );
    let row = db::raw_all(c, &q.sql, q.values).await?;
    Ok(row
        .first()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap_or_default())
}

/// (expiring within 90 days, within 30 days, expired) batches with stock.
/// Expiring counts skip quarantined and recalled batches; expired stock is
/// counted whatever its status, since it must leave the shelf either way.
async fn expiry_counts<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
    today: NaiveDate,
) -> Result<(i64, i64, i64)> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT count(*) FILTER (WHERE expiry_date >= {today}::date AND regulator_status = 'active'),
                  count(*) FILTER (WHERE expiry_date >= {today}::date AND expiry_date <= {today}::date + 30
                                     AND regulator_status = 'active'),
                  count(*) FILTER (WHERE expiry_date < {today}::date)
           FROM batches
           WHERE qty_remaining > 0 AND NOT is_deleted AND expiry_date <= {today}::date + 90
             AND ({branch}::uuid IS NULL OR branch_id = {branch})"#
    );
    let row = db::raw_all(c, &q.sql, q.values).await?;
    Ok(row
        .first()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap_or_default())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BranchRevenue {
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub branch_name: String,
    pub branch_code: String,
    pub sales_count: i64,
    /// Sales less the credit notes issued in the window.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub revenue: Decimal,
    /// Share of the total revenue in percent, one decimal; 0 when the total is 0.
    #[serde(serialize_with = "decimal_num")]
    #[schema(value_type = f64)]
    pub share_pct: Decimal,
    /// Credit notes issued in the window (already taken off `revenue`).
    pub returns_count: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub returns_total: Decimal,
}

/// Every active branch with its sales in the window, revenue descending
/// (ties by name); branches without sales carry zeros.
pub async fn branch_comparison<C: GenericClient + Sync>(
    c: &C,
    w: &ReportWindow,
    branch: Option<Uuid>,
) -> Result<Vec<BranchRevenue>> {
    let (start, end) = (w.start, w.end);
    // With a branch, the other branches are left out before the shares are
    // taken, so the one row's share is of its own revenue.
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT b.id, b.name, b.code, coalesce(x.n, 0)::bigint,
                  coalesce(x.revenue, 0) - coalesce(r.total, 0),
                  coalesce(round(100 * (coalesce(x.revenue, 0) - coalesce(r.total, 0))
                                 / nullif(sum(coalesce(x.revenue, 0) - coalesce(r.total, 0)) OVER (), 0), 1), 0),
                  coalesce(r.n, 0)::bigint, coalesce(r.total, 0)
           FROM branches b
           LEFT JOIN (SELECT branch_id, count(*) AS n, sum(total) AS revenue FROM sales
                      WHERE created_at >= {start} AND created_at < {end}
                        AND ({branch}::uuid IS NULL OR branch_id = {branch})
                      GROUP BY branch_id) x ON x.branch_id = b.id
           LEFT JOIN (SELECT branch_id, count(*) AS n, sum(total) AS total FROM sale_returns
                      WHERE status = 'issued' AND issued_at >= {start} AND issued_at < {end}
                        AND ({branch}::uuid IS NULL OR branch_id = {branch})
                      GROUP BY branch_id) r ON r.branch_id = b.id
           WHERE b.is_active AND NOT b.is_deleted
             AND ({branch}::uuid IS NULL OR b.id = {branch})
           ORDER BY 5 DESC, b.name, b.id"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| BranchRevenue {
            branch_id: r.get(0),
            branch_name: r.get(1),
            branch_code: r.get(2),
            sales_count: r.get(3),
            revenue: r.get(4),
            share_pct: r.get(5),
            returns_count: r.get(6),
            returns_total: r.get(7),
        })
        .collect())
}

/// The rows behind one of the summary's stock or expiry counts (the lists
/// the console's dashboard links to), with the same filters as the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alert {
    LowStock,
    OutOfStock,
    Expiring30,
    Expiring90,
    Expired,
}

impl Alert {
    pub const ALL: [Alert; 5] = [
        Alert::LowStock,
        Alert::OutOfStock,
        Alert::Expiring30,
        Alert::Expiring90,
        Alert::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Alert::LowStock => "low-stock",
            Alert::OutOfStock => "out-of-stock",
            Alert::Expiring30 => "expiring-30",
            Alert::Expiring90 => "expiring-90",
            Alert::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Alert> {
        Alert::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Whether the list is of medicines (stock) rather than batches (expiry).
    pub fn is_stock(self) -> bool {
        matches!(self, Alert::LowStock | Alert::OutOfStock)
    }
}

/// At most this many rows of an alert list are read.
pub const ALERT_LIST_MAX: i64 = 500;

/// A medicine (stock alerts) or a batch (expiry alerts) behind a count.
#[derive(Debug, Clone)]
pub struct AlertRow {
    pub medicine_id: Uuid,
    pub medicine_name: String,
    /// Expiry alerts: the batch and its branch.
    pub batch_number: Option<String>,
    pub branch_code: Option<String>,
    pub expiry_date: Option<NaiveDate>,
    /// Stock alerts: the scope's stock and the medicine's threshold;
    /// expiry alerts: the batch's remaining quantity.
    pub quantity: i64,
    pub low_stock_threshold: Option<i32>,
}

/// The rows counted by `alert` in the summary of `branch` (`None`: every
/// branch) on `today`: stock alerts emptiest first, expiry alerts soonest
/// first; at most [`ALERT_LIST_MAX`].
pub async fn alert_list<C: GenericClient + Sync>(
    c: &C,
    branch: Option<Uuid>,
    today: NaiveDate,
    alert: Alert,
) -> Result<Vec<AlertRow>> {
    let limit = ALERT_LIST_MAX;
    if alert.is_stock() {
        let low = alert == Alert::LowStock;
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"SELECT m.id, m.name, coalesce(st.qty, 0)::bigint, m.low_stock_threshold
               FROM medicines m
               LEFT JOIN (SELECT medicine_id, sum(qty_remaining) AS qty FROM batches
                          WHERE qty_remaining > 0 AND NOT is_deleted
                            AND ({branch}::uuid IS NULL OR branch_id = {branch})
                          GROUP BY medicine_id) st ON st.medicine_id = m.id
               WHERE m.is_active AND NOT m.is_deleted
                 AND CASE WHEN {low}::boolean
                          THEN coalesce(st.qty, 0) > 0 AND coalesce(st.qty, 0) <= m.low_stock_threshold
                          ELSE coalesce(st.qty, 0) <= 0 END
               ORDER BY 3, m.name, m.id
               LIMIT {limit}"#
        );
        let rows = db::raw_all(c, &q.sql, q.values).await?;
        return Ok(rows
            .iter()
            .map(|r| AlertRow {
                medicine_id: r.get(0),
                medicine_name: r.get(1),
                batch_number: None,
                branch_code: None,
                expiry_date: None,
                quantity: r.get(2),
                low_stock_threshold: Some(r.get(3)),
            })
            .collect());
    }
    let (min_days, max_days) = match alert {
        Alert::Expiring30 => (0, 30),
        Alert::Expiring90 => (0, 90),
        // Expired: any past day (a century back covers every batch).
        _ => (-36_500, -1),
    };
    let expired = alert == Alert::Expired;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT m.id, m.name, b.batch_number, br.code, b.expiry_date, b.qty_remaining::bigint
           FROM batches b
           JOIN medicines m ON m.id = b.medicine_id
           JOIN branches br ON br.id = b.branch_id
           WHERE b.qty_remaining > 0 AND NOT b.is_deleted
             AND ({branch}::uuid IS NULL OR b.branch_id = {branch})
             AND b.expiry_date >= {today}::date + {min_days}::int
             AND b.expiry_date <= {today}::date + {max_days}::int
             AND ({expired}::boolean OR b.regulator_status = 'active')
           ORDER BY b.expiry_date, m.name, b.id
           LIMIT {limit}"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| AlertRow {
            medicine_id: r.get(0),
            medicine_name: r.get(1),
            batch_number: Some(r.get(2)),
            branch_code: Some(r.get(3)),
            expiry_date: Some(r.get(4)),
            quantity: r.get(5),
            low_stock_threshold: None,
        })
        .collect())
}
