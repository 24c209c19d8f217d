//! Reports: sales, sales by pharmacist, inventory, purchases and VAT. Every
//! figure is aggregated by PostgreSQL (GROUP BY, day and month buckets in the
//! organisation's time zone); Rust only shapes the rows. Money is summed as
//! `numeric` and carried as `Decimal`.

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::{self, Pool};
use crate::replica::Reads;
use crate::window::ReportWindow;
use crate::Result;
use deadpool_postgres::{GenericClient, Object};
use sea_query::Values;

/// A connection for the reports: a report may be a few seconds old, so they
/// read from the streaming standby while it is within its lag bound, else
/// from the primary. The API and the console both connect here, so both read
/// the same place.
pub async fn connect(reads: &Reads<'_>) -> Result<Object> {
    reads.standby().await
}

mod inventory;
mod margins;
mod pharmacist;
mod purchases;
mod sales;
mod valuation;
mod vat;

pub use inventory::{inventory, InventoryReport};
pub use margins::{margins, MarginReport, MarginRow};
pub use pharmacist::{by_pharmacist, PharmacistReport};
pub use purchases::{purchases, PurchasesReport};
pub use sales::{sales, SalesReport};
pub use valuation::{stock_valuation, StockValuation, ValuationRow};
pub use vat::{vat, VatReport};

/// The `group_by` checks of the valuation and margins reports.
pub mod grouping {
    pub use super::margins::{group_by as margins, GROUP_BY as MARGINS};
    pub use super::valuation::{group_by as valuation, GROUP_BY as VALUATION};
}

/// The default report window: the last 30 days up to today (Limits).
pub const DEFAULT_WINDOW_DAYS: i64 = 30;

/// Rows in the lists the spec caps (Limits).
pub const TOP_SELLING: i64 = 10;

pub const RECENT_SALES: i64 = 8;

pub const LOW_STOCK_LIST: i64 = 20;

pub const TOP_PURCHASED: i64 = 20;

/// A decimal (a percentage) as a JSON number.
pub fn decimal_num<S: serde::Serializer>(
    d: &Decimal,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.to_f64().unwrap_or_default())
}

/// `100 × part / whole`, one decimal (half away from zero); 0 when `whole` is 0.
pub fn ratio_pct(part: Decimal, whole: Decimal) -> Decimal {
    if whole.is_zero() {
        return Decimal::ZERO;
    }
    (Decimal::ONE_HUNDRED * part / whole)
        .round_dp_with_strategy(1, RoundingStrategy::MidpointAwayFromZero)
}

/// What a report covers: the days, and one branch or (`None`) all of them.
pub struct Scope<'a> {
    pub window: &'a ReportWindow,
    pub branch: Option<Uuid>,
}

/// Where the report summaries (`sales_days`, `medicine_days`,
/// `medicine_months`, written by triggers with the rows they sum) disagree
/// with the ledger, or a chain-wide month roll-up with its months' rows:
/// one line per differing row, nothing when they agree.
/// Part of the invariant checks.
pub async fn summary_violations<C: GenericClient + Sync>(c: &C) -> Result<Vec<String>> {
    let rows = db::raw_all(
        c,
        "SELECT d FROM report_summary_differences() d
         UNION ALL SELECT d FROM chain_month_differences() d",
        Values(Vec::new()),
    )
    .await?;
    Ok(rows
        .iter()
        .map(|r| {
            format!(
                "report summary differs from the ledger: {}",
                r.get::<_, String>(0)
            )
        })
        .collect())
}

fn first(rows: &[Row]) -> Result<&Row> {
    rows.first()
        .ok_or_else(|| crate::Error::internal("aggregate query returned no row"))
}

/// Rolls up the chain-wide month rows of the months that are over and not
/// yet rolled up (`roll_up_chain_months`, migration 0030); how many months
/// it rolled up. Every process calls it now and then; a month another
/// process is rolling up, or a writer is changing, waits for the next call.
pub async fn roll_up_closed_months(pool: &Pool) -> Result<i32> {
    let client = pool.get().await?;
    let rows = db::raw_all(&client, "SELECT roll_up_chain_months()", Values(Vec::new())).await?;
    Ok(rows.first().map_or(0, |r| r.get(0)))
}
