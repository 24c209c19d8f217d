//! The VAT report: taxable amounts and VAT collected by month.

use chrono::{Datelike, NaiveDate};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{first, Scope};
use crate::{db, wire, Result};

/// One month (or the window's total) of the VAT report. Taxable amounts are
/// net of VAT (line total − line VAT). Credit notes come off the month they
/// were issued in, at the rate their sale line carried.
#[derive(Debug, Serialize, ToSchema)]
pub struct VatFigures {
    /// Lines sold at 0 % (zero-rated and exempt medicines, or standard-rated
    /// ones while tax was off).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub taxable_0: Decimal,
    /// Lines that carried VAT, whatever the configured standard rate.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub taxable_18: Decimal,
    /// Compatibility alias of `taxable_18` (same value).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub taxable_15: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat_collected: Decimal,
    /// taxable_0 + taxable_18 + vat_collected (what customers paid).
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub grand_total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VatMonth {
    /// `YYYY-MM` in the organisation's time zone.
    pub month: String,
    #[serde(flatten)]
    pub figures: VatFigures,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VatReport {
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// Months with sales or credit notes in the window, newest first.
    pub by_month: Vec<VatMonth>,
    pub totals: VatFigures,
}

/// Each month of the window is one range of the lines' time index, summed
/// on its own (no per-line month bucketing, no sort), less the lines of the
/// credit notes issued in that month; the `()` grouping set adds the
/// months up.
pub async fn vat<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<VatReport> {
    let w = s.window;
    let (from, start, end, tz, branch) = (w.from, w.start, w.end, w.tz.clone(), s.branch);
    // An integer series of known length keeps the planner's row estimate
    // (and so its cost, and JIT) honest.
    let months =
        (w.to.year() * 12 + w.to.month() as i32) - (from.year() * 12 + from.month() as i32) + 1;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT grouping(k.month), k.month,
                  coalesce(sum(a.taxable_0), 0) - coalesce(sum(r.taxable_0), 0),
                  coalesce(sum(a.taxable_18), 0) - coalesce(sum(r.taxable_18), 0),
                  coalesce(sum(a.vat), 0) - coalesce(sum(r.vat), 0),
                  coalesce(sum(a.grand), 0) - coalesce(sum(r.grand), 0)
           FROM (SELECT to_char(m, 'YYYY-MM') AS month,
                        greatest({start}::timestamptz, m AT TIME ZONE {tz}) AS lo,
                        least({end}::timestamptz, (m + interval '1 month') AT TIME ZONE {tz}) AS hi
                 FROM (SELECT date_trunc('month', {from}::date::timestamp) + make_interval(months => i) AS m
                       FROM generate_series(0, {months}::int - 1) i) ms) k
           CROSS JOIN LATERAL (
                 SELECT sum(line_total - vat_amount) FILTER (WHERE vat_rate = 0) AS taxable_0,
                        sum(line_total - vat_amount) FILTER (WHERE vat_rate > 0) AS taxable_18,
                        sum(vat_amount) AS vat, sum(line_total) AS grand, count(*) AS lines
                 FROM sale_items
                 WHERE sold_at >= k.lo AND sold_at < k.hi
                   AND ({branch}::uuid IS NULL OR branch_id = {branch})) a
           CROSS JOIN LATERAL (
                 SELECT sum(ri.line_total - ri.vat_amount) FILTER (WHERE ri.vat_rate = 0) AS taxable_0,
                        sum(ri.line_total - ri.vat_amount) FILTER (WHERE ri.vat_rate > 0) AS taxable_18,
                        sum(ri.vat_amount) AS vat, sum(ri.line_total) AS grand, count(*) AS lines
                 FROM sale_returns cn JOIN sale_return_items ri ON ri.return_id = cn.id
                 WHERE cn.status = 'issued' AND cn.issued_at >= k.lo AND cn.issued_at < k.hi
                   AND ({branch}::uuid IS NULL OR cn.branch_id = {branch})) r
           WHERE a.lines > 0 OR r.lines > 0
           GROUP BY GROUPING SETS ((k.month), ())
           ORDER BY 1 DESC, 2 DESC"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let figures = |r: &Row| {
        let taxable_18: Decimal = r.get(3);
        VatFigures {
            taxable_0: r.get(2),
            taxable_18,
            taxable_15: taxable_18,
            vat_collected: r.get(4),
            grand_total: r.get(5),
        }
    };
    let mut report = VatReport {
        from_date: w.from,
        to_date: w.to,
        branch_id: s.branch,
        by_month: Vec::new(),
        totals: figures(first(&rows)?),
    };
    for r in rows.iter().filter(|r| r.get::<_, i32>(0) == 0) {
        report.by_month.push(VatMonth {
            month: r.get(1),
            figures: figures(r),
        });
    }
    Ok(report)
}
