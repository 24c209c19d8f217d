//! Customers (organisation-wide) and their ledger: reads and plain writes.
//! Balance changes live in `actors::customers` (payments, credit sales).

use deadpool_postgres::GenericClient;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Order, Query};
use uuid::Uuid;

use actors::changes::Op;
use actors::customers::{self, Customer, LedgerRow, COLUMNS};
use actors::{db, Result};

use crate::http::extract::Page;
use crate::store::synced;
use crate::store::users::escape_like;

pub use actors::customers::get;

/// Live customers by name; `search` matches name or phone in part, or the
/// national id exactly.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    search: Option<&str>,
    page: Page,
) -> Result<(Vec<Customer>, i64)> {
    let mut base = Query::select()
        .from("customers")
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    if let Some(s) = search.map(str::trim).filter(|s| !s.is_empty()) {
        let pattern = format!("%{}%", escape_like(s));
        base.cond_where(
            Cond::any()
                .add(Expr::col("name").ilike(pattern.clone()))
                .add(Expr::col("phone").ilike(pattern))
                .add(Expr::col("national_id").eq(s)),
        );
    }
    let total_q = base.clone().expr(Expr::col("id").count()).to_owned();
    let total: i64 = db::fetch_one(c, &total_q).await?.get(0);
    let q = base
        .columns(COLUMNS)
        .order_by_expr(Expr::cust("lower(name)"), Order::Asc)
        .order_by("id", Order::Asc)
        .offset(page.offset())
        .limit(page.limit())
        .to_owned();
    let items = db::fetch_all(c, &q)
        .await?
        .iter()
        .map(Customer::from_row)
        .collect();
    Ok((items, total))
}

pub use crate::store::synced::Fields;

pub async fn insert<C: GenericClient + Sync>(tx: &C, fields: Fields) -> Result<Customer> {
    let (row, rev) = synced::insert(tx, "customers", &COLUMNS, fields).await?;
    let customer = Customer::from_row(&row);
    customers::emit(tx, rev, &customer, Op::Create).await?;
    Ok(customer)
}

/// Updates (or, with `Op::Delete`, soft-deletes) a live customer.
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    fields: Fields,
    op: Op,
) -> Result<Option<Customer>> {
    let Some((row, rev)) = synced::update(tx, "customers", &COLUMNS, id, fields).await? else {
        return Ok(None);
    };
    let customer = Customer::from_row(&row);
    customers::emit(tx, rev, &customer, op).await?;
    Ok(Some(customer))
}

/// A customer's ledger, newest first, paged.
pub async fn ledger<C: GenericClient + Sync>(
    c: &C,
    customer_id: Uuid,
    page: Page,
) -> Result<(Vec<LedgerRow>, i64)> {
    let total_q = Query::select()
        .expr(Expr::col("id").count())
        .from("customer_ledger")
        .and_where(Expr::col("customer_id").eq(customer_id))
        .to_owned();
    let total: i64 = db::fetch_one(c, &total_q).await?.get(0);
    let q = Query::select()
        .expr(Expr::cust("l.*"))
        .expr_as(Expr::cust("coalesce(u.full_name, '')"), "created_by_name")
        .from_as("customer_ledger", "l")
        .join_as(
            sea_query::JoinType::LeftJoin,
            "users",
            "u",
            Expr::col(("u", "id")).equals(("l", "created_by")),
        )
        .and_where(Expr::col(("l", "customer_id")).eq(customer_id))
        .order_by(("l", "created_at"), Order::Desc)
        .order_by(("l", "id"), Order::Desc)
        .offset(page.offset())
        .limit(page.limit())
        .to_owned();
    let rows = db::fetch_all(c, &q)
        .await?
        .iter()
        .map(customers::ledger_row)
        .collect();
    Ok((rows, total))
}
