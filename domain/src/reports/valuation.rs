//! What the stock is worth at the end of a day, from the movement ledger:
//! each batch's units are the sum of its movements up to that moment and
//! are valued at the batch's cost, fixed when it was received (a batch
//! received by the pack is worth its share of what its receipt cost, to
//! the cent: `batch_value`). So a past day answers what the books said
//! then, whatever happened since.

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use super::first;
use crate::error::Result;
use crate::input;
use crate::window::ReportWindow;
use crate::{db, wire};

/// How the valuation is grouped.
pub const GROUP_BY: [&str; 2] = ["medicine", "category"];

/// One group's stock at the day's end.
#[derive(Debug, Default, Clone, Serialize, ToSchema)]
pub struct ValuationRow {
    /// The medicine's id, or the category (empty for none).
    pub key: String,
    /// The medicine's name, or the category.
    pub name: String,
    /// Base units on hand, expired and quarantined ones included.
    pub quantity: i64,
    /// Units × batch cost, to the cent.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub value: Decimal,
    /// The part of `value` in batches expired by that day.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub expired_value: Decimal,
    /// The part of `value` (not expired) in batches quarantined or
    /// recalled.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub quarantined_value: Decimal,
}

/// The stock valuation at the end of `as_of`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StockValuation {
    #[schema(value_type = String, format = Date)]
    pub as_of: NaiveDate,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// `medicine` or `category`.
    pub group_by: String,
    /// Groups holding stock, highest value first.
    pub items: Vec<ValuationRow>,
    pub total_quantity: i64,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total_value: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub expired_value: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub quarantined_value: Decimal,
}

/// `group_by` checked: `medicine` (the default) or `category`.
pub fn group_by(raw: Option<&str>) -> Result<String> {
    let g = input::one_of_or_blank("group_by", raw, &GROUP_BY)?;
    Ok(g.unwrap_or_else(|| GROUP_BY[0].to_owned()))
}

/// The valuation at the end of `day.to` (the window's `end`), for one
/// branch or the chain, grouped as `group`. Expiry counts by the day
/// valued (a batch expiring that day is still sellable on it, as at the
/// counter); quarantine is the batch's status now (the ledger has no
/// history of it).
pub async fn stock_valuation<C: GenericClient + Sync>(
    c: &C,
    day: &ReportWindow,
    branch: Option<Uuid>,
    group: &str,
) -> Result<StockValuation> {
    let (end, as_of, by_category) = (day.end, day.to, group == "category");
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH held AS (
               SELECT m.batch_id, sum(m.qty)::bigint AS qty
               FROM stock_movements m
               WHERE m.created_at < {end} AND ({branch}::uuid IS NULL OR m.branch_id = {branch})
               GROUP BY m.batch_id
               HAVING sum(m.qty) <> 0),
           valued AS (
               SELECT CASE WHEN {by_category} THEN coalesce(md.category, '')
                           ELSE md.id::text END AS key,
                      CASE WHEN {by_category} THEN coalesce(md.category, '')
                           ELSE md.name END AS name,
                      h.qty,
                      batch_value(h.qty::int, b.unit_cost, b.received_total, b.qty_received)
                        AS value,
                      b.expiry_date < {as_of} AS expired,
                      b.regulator_status IN ('quarantined', 'recalled') AS held_back
               FROM held h
               JOIN batches b ON b.id = h.batch_id
               JOIN medicines md ON md.id = b.medicine_id)
           SELECT grouping(key), key, name, sum(qty)::bigint, round(sum(value), 2),
                  round(coalesce(sum(value) FILTER (WHERE expired), 0), 2),
                  round(coalesce(sum(value) FILTER (WHERE held_back AND NOT expired), 0), 2)
           FROM valued
           GROUP BY GROUPING SETS ((key, name), ())
           ORDER BY 1 DESC, 5 DESC, 3, 2"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let totals = first(&rows)?;
    let row = |r: &Row| ValuationRow {
        key: r.get::<_, Option<String>>(1).unwrap_or_default(),
        name: r.get::<_, Option<String>>(2).unwrap_or_default(),
        quantity: r.get::<_, Option<i64>>(3).unwrap_or_default(),
        value: r.get::<_, Option<Decimal>>(4).unwrap_or_default(),
        expired_value: r.get(5),
        quarantined_value: r.get(6),
    };
    let total = row(totals);
    Ok(StockValuation {
        as_of,
        branch_id: branch,
        group_by: group.to_owned(),
        items: rows
            .iter()
            .filter(|r| r.get::<_, i32>(0) == 0)
            .map(row)
            .collect(),
        total_quantity: total.quantity,
        total_value: total.value,
        expired_value: total.expired_value,
        quarantined_value: total.quarantined_value,
    })
}
