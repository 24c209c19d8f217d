//! What the stock is worth at the end of a day, from the movement ledger
//! (through its summaries): each batch's units at that moment, valued at
//! the batch's cost, fixed when it was received (a batch received by the
//! pack is worth its share of what its receipt cost). So a past day
//! answers what the books said then, whatever happened since.

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

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
/// branch or the chain, grouped as `group`.
///
/// Units and value per medicine are the stock held now (the batches'
/// remaining units, which the ledger sums to) less what moved after that
/// day (`medicine_stock_moved_after`: day rows for the rest of its month,
/// month rows after), so a day a year back reads about twelve rows per
/// medicine and branch rather than a year of movements. A unit is worth
/// its batch's unit value unrounded (`batch_unit_value`); each group is
/// rounded to the cent once, and the totals add the rounded groups up.
///
/// The expired and quarantined parts are per batch from the ledger, for
/// the few batches they can concern: expired by the day valued (a batch
/// expiring that day is still sellable on it, as at the counter), or
/// quarantined or recalled now (the ledger has no history of status).
pub async fn stock_valuation<C: GenericClient + Sync>(
    c: &C,
    day: &ReportWindow,
    branch: Option<Uuid>,
    group: &str,
) -> Result<StockValuation> {
    let (end, as_of, by_category) = (day.end, day.to, group == "category");
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH now_held AS (
               SELECT b.medicine_id, b.qty_remaining::bigint AS qty,
                      b.qty_remaining * batch_unit_value(b.unit_cost, b.received_total, b.qty_received)
                        AS value
               FROM batches b
               WHERE b.qty_remaining > 0 AND ({branch}::uuid IS NULL OR b.branch_id = {branch})),
           held AS (
               SELECT medicine_id, sum(qty)::bigint AS qty, sum(value) AS value
               FROM (SELECT medicine_id, qty, value FROM now_held
                     UNION ALL
                     SELECT medicine_id, -qty, -value
                     FROM medicine_stock_moved_after({branch}::uuid, {as_of}::date)) x
               GROUP BY medicine_id
               HAVING sum(qty) <> 0),
           flagged AS (
               SELECT b.medicine_id,
                      sum(q.qty * batch_unit_value(b.unit_cost, b.received_total, b.qty_received))
                        FILTER (WHERE b.expiry_date < {as_of}) AS expired,
                      sum(q.qty * batch_unit_value(b.unit_cost, b.received_total, b.qty_received))
                        FILTER (WHERE b.expiry_date >= {as_of}) AS held_back
               FROM batches b
               CROSS JOIN LATERAL (SELECT sum(m.qty) AS qty FROM stock_movements m
                                   WHERE m.batch_id = b.id AND m.created_at < {end}) q
               WHERE (b.expiry_date < {as_of} OR b.regulator_status IN ('quarantined', 'recalled'))
                 AND ({branch}::uuid IS NULL OR b.branch_id = {branch})
                 AND q.qty <> 0
               GROUP BY b.medicine_id),
           valued AS (
               SELECT CASE WHEN {by_category} THEN coalesce(md.category, '')
                           ELSE md.id::text END AS key,
                      CASE WHEN {by_category} THEN coalesce(md.category, '')
                           ELSE md.name END AS name,
                      h.qty, h.value, coalesce(f.expired, 0) AS expired,
                      coalesce(f.held_back, 0) AS held_back
               FROM held h
               JOIN medicines md ON md.id = h.medicine_id
               LEFT JOIN flagged f ON f.medicine_id = h.medicine_id)
           SELECT key, name, sum(qty)::bigint, round(sum(value), 2), round(sum(expired), 2),
                  round(sum(held_back), 2)
           FROM valued
           GROUP BY key, name
           ORDER BY 4 DESC, 2, 1"#
    );
    let rows = db::raw_planned(c, &q.sql, q.values).await?;
    let items: Vec<ValuationRow> = rows
        .iter()
        .map(|r| ValuationRow {
            key: r.get::<_, Option<String>>(0).unwrap_or_default(),
            name: r.get::<_, Option<String>>(1).unwrap_or_default(),
            quantity: r.get(2),
            value: r.get(3),
            expired_value: r.get(4),
            quarantined_value: r.get(5),
        })
        .collect();
    Ok(StockValuation {
        as_of,
        branch_id: branch,
        group_by: group.to_owned(),
        total_quantity: items.iter().map(|i| i.quantity).sum(),
        total_value: items.iter().map(|i| i.value).sum(),
        expired_value: items.iter().map(|i| i.expired_value).sum(),
        quarantined_value: items.iter().map(|i| i.quarantined_value).sum(),
        items,
    })
}
