//! The VAT report: taxable amounts and VAT collected by month.

use chrono::NaiveDate;
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

/// The window's days of `sales_days` (their lines' figures, credit notes
/// already subtracted) summed per calendar month; the `()` grouping set
/// adds the months up.
pub async fn vat<C: GenericClient + Sync>(c: &C, s: &Scope<'_>) -> Result<VatReport> {
    let w = s.window;
    let (from, to, branch) = (w.from, w.to, s.branch);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT grouping(month), month, coalesce(sum(taxable_0), 0), coalesce(sum(taxable_std), 0),
                  coalesce(sum(line_vat), 0), coalesce(sum(line_total), 0)
           FROM (SELECT to_char(day, 'YYYY-MM') AS month, sum(taxable_0) AS taxable_0,
                        sum(taxable_std) AS taxable_std, sum(line_vat) AS line_vat,
                        sum(line_total) AS line_total
                 FROM sales_days
                 WHERE day >= {from} AND day <= {to}
                   AND ({branch}::uuid IS NULL OR branch_id = {branch})
                 GROUP BY 1
                 HAVING sum(sale_lines) > 0 OR sum(return_lines) > 0) m
           GROUP BY GROUPING SETS ((month), ())
           ORDER BY 1 DESC, 2 DESC"#
    );
    let rows = db::raw_planned(c, &q.sql, q.values).await?;
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
