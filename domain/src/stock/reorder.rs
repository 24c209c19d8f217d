//! Reorder suggestions: active medicines at or below their low-stock
//! threshold, lowest stock first, each with the quantity that brings it to
//! twice its threshold and the supplier it last came from.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use deadpool_postgres::GenericClient;

use crate::{branches, db, Error, Result};

/// Most suggestions one answer carries.
const SUGGESTION_LIMIT: i64 = 100;

#[derive(Debug, Serialize, ToSchema)]
pub struct ReorderSuggestion {
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    pub name: String,
    /// Units on hand in the scope (branch or chain).
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
    /// `2 × low_stock_threshold − stock_quantity`.
    pub suggested_qty: i64,
    /// Supplier of the most recently received batch naming one.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub supplier_id: Option<Uuid>,
    pub supplier_name: Option<String>,
    pub lead_time_days: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReorderList {
    /// Lowest stock first, at most 100.
    pub items: Vec<ReorderSuggestion>,
    /// Rows returned.
    pub total: i64,
}

/// The quantity to order: enough to bring the stock to twice its
/// threshold.
pub fn suggested_qty(low_stock_threshold: i32, stock_quantity: i64) -> i64 {
    2 * i64::from(low_stock_threshold) - stock_quantity
}

/// The suggestions for one branch's stock, or the whole chain's when
/// `branch` is `None`, lowest stock first, at most 100. A branch the caller
/// `named` must exist (400 naming `branch_id`).
pub async fn suggestions<C: GenericClient + Sync>(
    client: &C,
    branch: Option<Uuid>,
    named: bool,
) -> Result<ReorderList> {
    if let (Some(b), true) = (branch, named) {
        branches::get(client, b)
            .await?
            .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?;
    }
    let items = low_stock(client, branch, Some(SUGGESTION_LIMIT)).await?;
    let total = items.len() as i64;
    Ok(ReorderList { items, total })
}

/// Every suggestion of a scope (branch, or the chain when `None`), lowest
/// stock first, at most `cap` of them (`None`: all). A purchase order
/// drafted from the suggestions reads them uncapped, so one supplier's low
/// items are never crowded out of the list by another's.
pub async fn low_stock<C: GenericClient + Sync>(
    client: &C,
    branch: Option<Uuid>,
    cap: Option<i64>,
) -> Result<Vec<ReorderSuggestion>> {
    // `branch` NULL means the whole chain.
    let sql = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH on_hand AS (
               SELECT medicine_id, sum(qty_remaining)::bigint AS qty
               FROM batches
               WHERE NOT is_deleted AND ({branch}::uuid IS NULL OR branch_id = {branch}::uuid)
               GROUP BY medicine_id
           ), last_supplier AS (
               SELECT DISTINCT ON (medicine_id) medicine_id, supplier_id
               FROM batches
               WHERE NOT is_deleted AND supplier_id IS NOT NULL
                 AND ({branch}::uuid IS NULL OR branch_id = {branch}::uuid)
               ORDER BY medicine_id, created_at DESC, id DESC
           )
           SELECT m.id, m.name, coalesce(h.qty, 0)::bigint AS stock_quantity,
                  m.low_stock_threshold, s.id AS supplier_id, s.name AS supplier_name,
                  s.lead_time_days
           FROM medicines m
           LEFT JOIN on_hand h ON h.medicine_id = m.id
           LEFT JOIN last_supplier ls ON ls.medicine_id = m.id
           LEFT JOIN suppliers s ON s.id = ls.supplier_id
           WHERE m.is_active AND NOT m.is_deleted
             AND coalesce(h.qty, 0) <= m.low_stock_threshold
           ORDER BY stock_quantity, m.name, m.id
           LIMIT {cap}"#
    );
    let rows = db::raw_all(client, &sql.sql, sql.values).await?;
    let items: Vec<ReorderSuggestion> = rows
        .iter()
        .map(|r| {
            let stock_quantity: i64 = r.get("stock_quantity");
            let low_stock_threshold: i32 = r.get("low_stock_threshold");
            ReorderSuggestion {
                medicine_id: r.get("id"),
                name: r.get("name"),
                stock_quantity,
                low_stock_threshold,
                suggested_qty: suggested_qty(low_stock_threshold, stock_quantity),
                supplier_id: r.get("supplier_id"),
                supplier_name: r.get("supplier_name"),
                lead_time_days: r.get("lead_time_days"),
            }
        })
        .collect();
    Ok(items)
}
