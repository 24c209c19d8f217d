//! Reading medicines: one, a filtered page, the stored row, and the default
//! low-stock threshold.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Order, Query, SelectStatement};
use uuid::Uuid;

use super::categories::slug;
use super::model::{Medicine, COLUMNS};
use crate::paging::{self, Page};
use crate::users::escape_like;
use crate::{db, Result};

/// Live stock of each medicine: at one branch, or across the chain.
pub(super) fn stock_expr(branch_id: Option<Uuid>) -> Expr {
    match branch_id {
        Some(b) => Expr::cust_with_values(
            "(SELECT coalesce(sum(b.qty_remaining), 0)::bigint FROM batches b \
             WHERE b.medicine_id = medicines.id AND NOT b.is_deleted AND b.branch_id = $1)",
            [b],
        ),
        None => Expr::cust(
            "(SELECT coalesce(sum(b.qty_remaining), 0)::bigint FROM batches b \
             WHERE b.medicine_id = medicines.id AND NOT b.is_deleted)",
        ),
    }
}

pub(super) fn select(branch_id: Option<Uuid>) -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .expr_as(stock_expr(branch_id), "stock_quantity")
        .from(Table::Medicines)
        .to_owned()
}

/// A live, active medicine with its stock in `branch_id`'s scope.
pub async fn get<C: GenericClient + Sync>(
    c: &C,
    id: Uuid,
    branch_id: Option<Uuid>,
) -> Result<Option<Medicine>> {
    let q = live_one(id, branch_id);
    Ok(db::fetch_opt(c, &q).await?.map(|r| Medicine::from_row(&r)))
}

/// The statement of `get` (for reads that join it).
pub fn live_one(id: Uuid, branch_id: Option<Uuid>) -> SelectStatement {
    select(branch_id)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned()
}

#[derive(Debug, Default)]
pub struct ListFilter {
    pub search: Option<String>,
    pub category: Option<String>,
    pub branch_id: Option<Uuid>,
}

/// Active medicines by name, paged; with the total.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<Medicine>, i64)> {
    let mut base = Query::select()
        .from(Table::Medicines)
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned();
    if let Some(s) = f.search.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        let pattern = format!("%{}%", escape_like(s));
        base.cond_where(
            Cond::any()
                .add(Expr::col("name").ilike(pattern.clone()))
                .add(Expr::col("generic_name").ilike(pattern))
                .add(Expr::col("barcode").eq(s)),
        );
    }
    if let Some(cat) = &f.category {
        base.and_where(Expr::col("category").eq(slug(cat)));
    }
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(COLUMNS)
            .expr_as(stock_expr(f.branch_id), "stock_quantity")
            .order_by("name", Order::Asc)
            .order_by("id", Order::Asc);
    })
    .await?;
    let items = rows.iter().map(Medicine::from_row).collect();
    Ok((items, total))
}

/// The current row of a live medicine (active or not), for updates.
pub async fn current<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Medicine>> {
    let q = select(None)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Medicine::from_row(&r)))
}

/// The settings' default low-stock threshold for new medicines.
pub async fn default_threshold<C: GenericClient + Sync>(c: &C) -> Result<i32> {
    let q = Query::select()
        .column("default_low_stock_threshold")
        .from(Table::Settings)
        .limit(1)
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)).unwrap_or(10))
}
