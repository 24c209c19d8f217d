//! Reading supplier returns back, and the register of supplier returns of
//! controlled medicines.

use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use super::SupplierReturn;
use crate::books;
use crate::db;
use crate::error::Result;
use crate::paging::{self, Page, Slice};
use crate::stock::left::{self, Document};
use crate::tables::Table;
use crate::wire;

/// What the register is, as its answer says.
pub const REGISTER_NOTE: &str = books::SUPPLIER_RETURNS_REGISTER_NOTE;

/// Supplier returns with their lines, shaped by `shape` (filters, order,
/// paging).
async fn select<C: GenericClient + Sync>(
    c: &C,
    shape: impl FnOnce(&mut SelectStatement),
) -> Result<Vec<SupplierReturn>> {
    let mut q = Query::select()
        .columns([
            ("r", "id"),
            ("r", "debit_note_number"),
            ("r", "branch_id"),
            ("r", "supplier_id"),
            ("r", "reason"),
            ("r", "notes"),
            ("r", "total_value"),
            ("r", "used_value"),
            ("r", "created_by"),
            ("r", "created_at"),
        ])
        .expr_as(Expr::col(("s", "name")), "supplier_name")
        .expr_as(Expr::cust("coalesce(u.full_name, '')"), "created_by_name")
        .from_as(Table::SupplierReturns, "r")
        .join_as(
            JoinType::InnerJoin,
            Table::Suppliers,
            "s",
            Expr::col(("s", "id")).equals(("r", "supplier_id")),
        )
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("r", "created_by")),
        )
        .to_owned();
    shape(&mut q);
    let mut found: Vec<SupplierReturn> = db::fetch_all(c, &q)
        .await?
        .iter()
        .map(|r| {
            let (total_value, used_value) = (r.get("total_value"), r.get("used_value"));
            SupplierReturn {
                id: r.get("id"),
                debit_note_number: r.get("debit_note_number"),
                branch_id: r.get("branch_id"),
                supplier_id: r.get("supplier_id"),
                supplier_name: r.get("supplier_name"),
                reason: r.get("reason"),
                notes: r.get("notes"),
                lines: Vec::new(),
                total_value,
                used_value,
                unused_value: total_value - used_value,
                created_by: r.get("created_by"),
                created_by_name: r.get("created_by_name"),
                created_at: r.get("created_at"),
            }
        })
        .collect();
    left::attach(
        c,
        Document::SupplierReturn,
        &mut found,
        |r| r.id,
        |r| &mut r.lines,
    )
    .await?;
    Ok(found)
}

/// One supplier return with its lines, whatever its branch (callers check
/// visibility).
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<SupplierReturn>> {
    let found = select(c, |q| {
        q.and_where(Expr::col(("r", "id")).eq(id));
    })
    .await?;
    Ok(found.into_iter().next())
}

/// Filters of the list; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub supplier_id: Option<Uuid>,
}

/// Newest first, paged; the page and the total.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<SupplierReturn>, i64)> {
    let filter = |q: &mut SelectStatement| {
        if let Some(b) = f.branch_id {
            q.and_where(Expr::col(("r", "branch_id")).eq(b));
        }
        if let Some(s) = f.supplier_id {
            q.and_where(Expr::col(("r", "supplier_id")).eq(s));
        }
    };
    let mut counted = Query::select()
        .from_as(Table::SupplierReturns, "r")
        .to_owned();
    filter(&mut counted);
    let total = paging::count(c, &counted, ("r", "id")).await?;
    let items = select(c, |q| {
        filter(q);
        q.order_by(("r", "created_at"), Order::Desc)
            .order_by(("r", "id"), Order::Desc);
        page.apply(q);
    })
    .await?;
    Ok((items, total))
}

/// One row of the register: a controlled medicine sent back to its supplier.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct SupplierReturnRegisterRow {
    /// The return line.
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub supplier_return_id: Uuid,
    pub debit_note_number: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub returned_at: DateTime<Utc>,
    #[schema(value_type = String)]
    pub supplier_id: Uuid,
    pub supplier_name: String,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    /// The medicine's schedule when it was returned.
    pub control_schedule: String,
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: NaiveDate,
    /// Base units returned.
    pub quantity: i32,
    /// `expired`, `damaged`, `recalled`, `wrong_item` or `other`.
    pub reason: String,
    pub returned_by_name: String,
}

/// Every supplier-return line of a medicine that was controlled when
/// returned, newest first.
pub async fn register<C: GenericClient + Sync>(
    c: &C,
    scope: books::Scope,
    paging: books::Paging,
) -> Result<(Vec<SupplierReturnRegisterRow>, i64)> {
    let mut base = Query::select()
        .from_as(Table::SupplierReturnItems, "i")
        .join_as(
            JoinType::InnerJoin,
            Table::SupplierReturns,
            "r",
            Expr::col(("r", "id")).equals(("i", "supplier_return_id")),
        )
        .and_where(Expr::col(("i", "is_controlled")).eq(true))
        .to_owned();
    if let Some(b) = scope.branch_id {
        base.and_where(Expr::col(("r", "branch_id")).eq(b));
    }
    if let Some(start) = scope.bounds.0 {
        base.and_where(Expr::col(("r", "created_at")).gte(start));
    }
    if let Some(end) = scope.bounds.1 {
        base.and_where(Expr::col(("r", "created_at")).lt(end));
    }
    let (rows, total) = paging::fetch(c, base, ("i", "id"), paging, |q| {
        q.columns([
            ("i", "id"),
            ("i", "supplier_return_id"),
            ("i", "medicine_id"),
            ("i", "batch_id"),
            ("i", "quantity"),
            ("i", "control_schedule"),
        ])
        .columns([
            ("r", "debit_note_number"),
            ("r", "branch_id"),
            ("r", "supplier_id"),
            ("r", "reason"),
        ])
        .expr_as(Expr::col(("r", "created_at")), "returned_at")
        .expr_as(Expr::col(("s", "name")), "supplier_name")
        .expr_as(Expr::col(("m", "name")), "medicine_name")
        .expr_as(Expr::col(("b", "batch_number")), "batch_number")
        .expr_as(Expr::col(("b", "expiry_date")), "expiry_date")
        .expr_as(Expr::cust("coalesce(u.full_name, '')"), "returned_by_name")
        .join_as(
            JoinType::InnerJoin,
            Table::Suppliers,
            "s",
            Expr::col(("s", "id")).equals(("r", "supplier_id")),
        )
        .join_as(
            JoinType::InnerJoin,
            Table::Medicines,
            "m",
            Expr::col(("m", "id")).equals(("i", "medicine_id")),
        )
        .join_as(
            JoinType::InnerJoin,
            Table::Batches,
            "b",
            Expr::col(("b", "id")).equals(("i", "batch_id")),
        )
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("r", "created_by")),
        )
        .order_by(("r", "created_at"), Order::Desc)
        .order_by(("i", "id"), Order::Desc);
    })
    .await?;
    let items = rows
        .iter()
        .map(|r: &Row| SupplierReturnRegisterRow {
            id: r.get("id"),
            supplier_return_id: r.get("supplier_return_id"),
            debit_note_number: r.get("debit_note_number"),
            branch_id: r.get("branch_id"),
            returned_at: r.get("returned_at"),
            supplier_id: r.get("supplier_id"),
            supplier_name: r.get("supplier_name"),
            medicine_id: r.get("medicine_id"),
            medicine_name: r.get("medicine_name"),
            control_schedule: r.get("control_schedule"),
            batch_id: r.get("batch_id"),
            batch_number: r.get("batch_number"),
            expiry_date: r.get("expiry_date"),
            quantity: r.get("quantity"),
            reason: r.get("reason"),
            returned_by_name: r.get("returned_by_name"),
        })
        .collect();
    Ok((items, total))
}
