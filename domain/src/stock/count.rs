//! Stock counts: what staff counted on the shelf becomes the stock on the
//! ledger. One transaction per count; a surplus lands on the newest batch,
//! a shortfall drains the oldest batches first, each as an `ADJUST` movement.

use std::collections::HashSet;

use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query};
use serde::Serialize;
use uuid::Uuid;

use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::stock::{self, Kind, Movement};
use actors::runtime::Command;

/// One counted medicine; `index` is its position in the request, for errors.
#[derive(Debug, Clone)]
pub struct CountLine {
    pub index: usize,
    pub medicine_id: Uuid,
    pub counted_quantity: i32,
    pub notes: String,
}

/// The answer to a submitted count.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CountResult {
    /// Id of the stored count.
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// Always `completed`: a count applies in full or not at all.
    pub status: String,
    /// Lines whose count differed from the ledger.
    pub adjustments_made: i32,
    /// In request order.
    pub items: Vec<CountItem>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CountItem {
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    /// Stock on the ledger before the count.
    pub db_quantity: i32,
    pub counted_quantity: i32,
    /// `counted_quantity - db_quantity`.
    pub delta: i32,
}

/// `POST /stockcount/submit` through the branch actor.
pub struct SubmitCount {
    pub branch_id: Uuid,
    pub user_id: Uuid,
    pub lines: Vec<CountLine>,
}

impl Command for SubmitCount {
    type Error = crate::Error;
    type Output = CountResult;
    const NAME: &'static str = "stock_count";

    async fn run(self, pool: Pool) -> Result<CountResult> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let result = submit(&tx, self).await?;
        tx.commit().await?;
        Ok(result)
    }
}

/// Applies a count in `tx`. The caller commits.
pub async fn submit<C: GenericClient + Sync>(tx: &C, count: SubmitCount) -> Result<CountResult> {
    let SubmitCount {
        branch_id,
        user_id,
        mut lines,
    } = count;
    check_medicines(tx, &lines).await?;
    let count_id = Uuid::now_v7();
    // Medicine order is the ledger's lock order (see stock.rs).
    lines.sort_by_key(|l| l.medicine_id);
    let mut items: Vec<(usize, CountItem, String)> = Vec::with_capacity(lines.len());
    for line in lines {
        let lots = stock::lock_all(tx, branch_id, line.medicine_id).await?;
        let on_ledger: i64 = lots.iter().map(|l| i64::from(l.remaining)).sum();
        let db_quantity = i32::try_from(on_ledger).map_err(Error::internal)?;
        let delta = line.counted_quantity - db_quantity;
        let movement = |batch_id, delta| Movement {
            batch_id,
            delta,
            kind: Kind::Adjust,
            reference: Some(("stock_count", count_id)),
            user_id,
        };
        if delta > 0 {
            let newest = lots.last().ok_or_else(|| {
                Error::validation(
                    format!("items[{}].counted_quantity", line.index),
                    "This medicine has never been received at this branch, so a surplus \
                     has no batch to go on: receive a purchase first.",
                )
            })?;
            stock::apply(tx, movement(newest.batch_id, delta)).await?;
        } else if delta < 0 {
            let mut left = -delta;
            for lot in lots.iter().filter(|l| l.remaining > 0) {
                if left == 0 {
                    break;
                }
                let take = std::cmp::min(left, lot.remaining);
                stock::apply(tx, movement(lot.batch_id, -take)).await?;
                left -= take;
            }
        }
        items.push((
            line.index,
            CountItem {
                medicine_id: line.medicine_id,
                db_quantity,
                counted_quantity: line.counted_quantity,
                delta,
            },
            line.notes,
        ));
    }
    let adjustments_made = items.iter().filter(|(_, i, _)| i.delta != 0).count();
    let adjustments_made = i32::try_from(adjustments_made).map_err(Error::internal)?;
    let header = Query::insert()
        .into_table("stock_counts")
        .columns(["id", "branch_id", "adjustments_made", "created_by"])
        .values_panic([
            count_id.into(),
            branch_id.into(),
            adjustments_made.into(),
            user_id.into(),
        ])
        .to_owned();
    db::execute(tx, &header).await?;
    let mut insert = Query::insert()
        .into_table("stock_count_lines")
        .columns([
            "stock_count_id",
            "medicine_id",
            "db_quantity",
            "counted_quantity",
            "delta",
            "notes",
        ])
        .to_owned();
    for (_, item, notes) in &items {
        insert.values_panic([
            count_id.into(),
            item.medicine_id.into(),
            item.db_quantity.into(),
            item.counted_quantity.into(),
            item.delta.into(),
            notes.clone().into(),
        ]);
    }
    db::execute(tx, &insert).await?;
    items.sort_by_key(|(index, _, _)| *index);
    Ok(CountResult {
        id: count_id,
        branch_id,
        status: "completed".to_owned(),
        adjustments_made,
        items: items.into_iter().map(|(_, item, _)| item).collect(),
    })
}

/// 400 naming the first line whose medicine does not exist.
async fn check_medicines<C: GenericClient + Sync>(tx: &C, lines: &[CountLine]) -> Result<()> {
    let ids: Vec<Uuid> = lines.iter().map(|l| l.medicine_id).collect();
    let q = Query::select()
        .column("id")
        .from("medicines")
        .and_where(Expr::col("id").is_in(ids))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    let known: HashSet<Uuid> = db::fetch_all(tx, &q)
        .await?
        .iter()
        .map(|r| r.get::<_, Uuid>(0))
        .collect();
    match lines.iter().find(|l| !known.contains(&l.medicine_id)) {
        Some(l) => Err(Error::validation(
            format!("items[{}].medicine_id", l.index),
            "This medicine does not exist.",
        )),
        None => Ok(()),
    }
}
