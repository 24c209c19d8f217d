//! A branch's batches as a shelf list: what each holds, its expiry, cost
//! and regulator status, filtered to what a person is looking for
//! (expiring soon, expired, quarantined, recalled) and paged. The console's
//! stock page reads it; quarantine, recall, release and write-offs are the
//! API's own functions.

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::paging::Page;
use crate::users::escape_like;
use crate::{db, Error, Result};

/// Which batches a shelf list shows.
pub const VIEWS: [&str; 5] = ["all", "expiring", "expired", "quarantined", "recalled"];

/// Days ahead "expiring" looks by default, and at most.
pub const EXPIRING_DAYS: i32 = 90;
pub const MAX_EXPIRING_DAYS: i32 = 730;

#[derive(Debug, Clone, Default)]
pub struct ShelfFilter {
    /// One branch, or every branch (`None`, admins).
    pub branch_id: Option<Uuid>,
    /// One of [`VIEWS`].
    pub view: String,
    /// Part of the medicine's name or generic name.
    pub search: String,
    /// How far ahead "expiring" looks.
    pub days: i32,
}

impl ShelfFilter {
    /// Refuses a view or a day count out of range, naming the field.
    pub fn check(&self) -> Result<()> {
        if !VIEWS.contains(&self.view.as_str()) {
            return Err(Error::validation(
                "view",
                "`view` must be all, expiring, expired, quarantined or recalled.",
            ));
        }
        if !(1..=MAX_EXPIRING_DAYS).contains(&self.days) {
            return Err(Error::validation(
                "days",
                format!("`days` must be from 1 to {MAX_EXPIRING_DAYS}."),
            ));
        }
        Ok(())
    }
}

/// One batch on the shelf list.
#[derive(Debug, Clone)]
pub struct ShelfBatch {
    pub batch_id: Uuid,
    pub branch_id: Uuid,
    pub medicine_id: Uuid,
    pub medicine_name: String,
    pub batch_number: String,
    pub expiry_date: NaiveDate,
    pub qty_remaining: i32,
    pub unit_cost: Decimal,
    /// What the units left are worth at cost.
    pub value: Decimal,
    pub regulator_status: String,
    pub is_controlled: bool,
    /// Expiry before the organisation's today.
    pub expired: bool,
}

/// The batches `f` selects, soonest expiry first, with how many there are.
/// Depleted batches show only under quarantined and recalled.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ShelfFilter,
    page: Page,
) -> Result<(Vec<ShelfBatch>, i64)> {
    f.check()?;
    let branch = f.branch_id;
    let view = f.view.clone();
    let search = f.search.trim().to_owned();
    let pattern = format!("%{}%", escape_like(&search));
    let days = f.days;
    let (offset, limit) = (page.offset() as i64, page.limit() as i64);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT b.id, b.branch_id, b.medicine_id, m.name, b.batch_number, b.expiry_date,
                  b.qty_remaining, b.unit_cost,
                  batch_value(b.qty_remaining, b.unit_cost, b.received_total, b.qty_received),
                  b.regulator_status, m.is_controlled, b.expiry_date < t.today,
                  count(*) OVER ()
           FROM batches b JOIN medicines m ON m.id = b.medicine_id
                CROSS JOIN (SELECT org_today() AS today) t
           WHERE NOT b.is_deleted
             AND ({branch}::uuid IS NULL OR b.branch_id = {branch}::uuid)
             AND (({view}::text = 'all' AND b.qty_remaining > 0)
               OR ({view}::text = 'expiring' AND b.qty_remaining > 0
                   AND b.expiry_date >= t.today AND b.expiry_date <= t.today + {days}::int)
               OR ({view}::text = 'expired' AND b.qty_remaining > 0 AND b.expiry_date < t.today)
               OR ({view}::text IN ('quarantined', 'recalled') AND b.regulator_status = {view}::text))
             AND ({search}::text = '' OR m.name ILIKE {pattern}::text OR m.generic_name ILIKE {pattern}::text)
           ORDER BY b.expiry_date, m.name, b.id
           OFFSET {offset}::bigint LIMIT {limit}::bigint"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let total = rows.first().map_or(0, |r| r.get::<_, i64>(12));
    let items = rows
        .iter()
        .map(|r| ShelfBatch {
            batch_id: r.get(0),
            branch_id: r.get(1),
            medicine_id: r.get(2),
            medicine_name: r.get(3),
            batch_number: r.get(4),
            expiry_date: r.get(5),
            qty_remaining: r.get(6),
            unit_cost: r.get(7),
            value: r.get(8),
            regulator_status: r.get(9),
            is_controlled: r.get(10),
            expired: r.get(11),
        })
        .collect();
    Ok((items, total))
}
