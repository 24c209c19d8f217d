//! Stock counts: what staff counted on the shelf becomes the stock on the
//! ledger. One transaction per count; a surplus lands on the newest batch,
//! a shortfall drains the oldest batches first, each as an `ADJUST` movement.

use crate::tables::Table;
use std::collections::{HashMap, HashSet};

use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Query};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::input;
use crate::stock::{self, Kind, Movement};
use actors::runtime::Command;

/// Most lines one stock count may carry.
pub const MAX_ITEMS: usize = 2000;

/// Longest note on one counted line.
pub const MAX_LINE_NOTES: usize = 500;

/// A stock count as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CountRequest {
    /// Required, non-empty; each medicine at most once.
    pub items: Option<Vec<CountRequestItem>>,
    /// Admins only: count on another branch.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CountRequestItem {
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    /// Units on the shelf: a whole number, 0 or more.
    #[schema(value_type = f64, minimum = 0)]
    pub counted_quantity: Decimal,
    pub notes: Option<String>,
}

impl CountRequest {
    /// Checks the shape of the count; medicines are checked in the
    /// transaction.
    pub fn lines(self) -> Result<Vec<CountLine>> {
        lines(self.items)
    }
}

fn lines(items: Option<Vec<CountRequestItem>>) -> Result<Vec<CountLine>> {
    let items = items.unwrap_or_default();
    if items.is_empty() {
        return Err(Error::validation(
            "items",
            "A stock count needs at least one item.",
        ));
    }
    if items.len() > MAX_ITEMS {
        return Err(Error::validation(
            "items",
            format!("A stock count may have at most {MAX_ITEMS} items."),
        ));
    }
    let mut seen: HashMap<Uuid, usize> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if let Some(first) = seen.insert(item.medicine_id, i) {
            return Err(Error::validation(
                format!("items[{i}].medicine_id"),
                format!("This medicine is already counted in items[{first}]."),
            ));
        }
        out.push(CountLine {
            index: i,
            medicine_id: item.medicine_id,
            counted_quantity: input::whole(
                &format!("items[{i}].counted_quantity"),
                item.counted_quantity,
                0,
            )?,
            notes: input::multiline(
                &format!("items[{i}].notes"),
                item.notes.as_deref().unwrap_or(""),
                MAX_LINE_NOTES,
            )?,
        });
    }
    Ok(out)
}

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
        crate::db::commit(tx).await?;
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
        .into_table(Table::StockCounts)
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
        .into_table(Table::StockCountLines)
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
        .from(Table::Medicines)
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
