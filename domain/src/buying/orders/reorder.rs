//! `POST /purchase-orders/from-reorder`: a draft for one supplier from
//! the branch's reorder suggestions.
//!
//! The suggestions are the reorder list's own rule
//! (`stock::reorder::low_stock`), read uncapped so that a supplier's low
//! items are never crowded out by other suppliers'. A suggested medicine is
//! this supplier's when the branch's most recent purchase batch of it
//! (`origin = 'purchase'`, newest first) came from this supplier; its line
//! orders `suggested_qty` base units at that batch's cost per base unit,
//! the last unit cost paid.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::request::{NewLine, NewOrder, MAX_LINES};
use super::write::{insert, live};
use super::PurchaseOrder;
use crate::acting::Acting;
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::input;
use crate::stock::reorder;
use crate::tables::Table;

/// `POST /purchase-orders/from-reorder` as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct FromReorderRequest {
    #[schema(value_type = String, format = Uuid)]
    pub supplier_id: Uuid,
    /// Admins only: another branch (default the caller's).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
}

/// The branch's latest purchase of each of `medicines`: its supplier and
/// its cost per base unit.
async fn last_purchases<C: GenericClient + Sync>(
    tx: &C,
    branch: Uuid,
    medicines: Vec<Uuid>,
) -> Result<HashMap<Uuid, (Option<Uuid>, Decimal)>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT DISTINCT ON (medicine_id) medicine_id, supplier_id, unit_cost
           FROM batches
           WHERE branch_id = {branch} AND origin = 'purchase' AND NOT is_deleted
             AND medicine_id = ANY({medicines})
           ORDER BY medicine_id, created_at DESC, id DESC"#
    );
    Ok(db::raw_all(tx, &q.sql, q.values)
        .await?
        .iter()
        .map(|r| {
            (
                r.get("medicine_id"),
                (r.get("supplier_id"), r.get("unit_cost")),
            )
        })
        .collect())
}

/// Drafts an order for the supplier from the branch's low medicines last
/// bought from it, lowest stock first (at most `MAX_LINES` lines); 400
/// naming `supplier_id` when there is nothing to order.
pub async fn from_reorder(
    pool: &Pool,
    acting: &Acting,
    body: FromReorderRequest,
) -> Result<PurchaseOrder> {
    let branch = acting.branch_scope(body.branch_id)?;
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    if !live(&tx, Table::Suppliers, body.supplier_id).await? {
        return Err(Error::validation(
            "supplier_id",
            "`supplier_id` names no supplier.",
        ));
    }
    let low = reorder::low_stock(&tx, Some(branch), None).await?;
    let last = last_purchases(&tx, branch, low.iter().map(|s| s.medicine_id).collect()).await?;
    let lines: Vec<NewLine> = low
        .iter()
        .filter(|s| s.suggested_qty >= 1)
        .filter_map(|s| {
            let (supplier, cost) = last.get(&s.medicine_id)?;
            (*supplier == Some(body.supplier_id)).then(|| NewLine {
                medicine_id: s.medicine_id,
                pack_id: None,
                quantity: s.suggested_qty.min(input::MAX_QUANTITY) as i32,
                unit_cost: *cost,
            })
        })
        .take(MAX_LINES)
        .collect();
    if lines.is_empty() {
        return Err(Error::validation(
            "supplier_id",
            "Nothing to order: no medicine of this branch is at or below its low-stock \
             threshold with its last purchase from this supplier.",
        ));
    }
    let order = NewOrder {
        supplier_id: body.supplier_id,
        branch_id: Some(branch),
        expected_date: None,
        notes: String::new(),
        lines,
    };
    let made = insert(&tx, acting, order).await?;
    crate::db::commit(tx).await?;
    Ok(made)
}
