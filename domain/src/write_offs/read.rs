//! Reading write-offs back, the expired batches still holding stock, and
//! the destruction register.

use crate::tables::Table;

use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use super::{WriteOff, MAX_LINES};
use crate::books;
use crate::db;
use crate::error::Result;
use crate::paging::{self, Page, Slice};
use crate::stock::left::{self, Document};
use crate::wire;

/// Write-offs with their lines, shaped by `shape` (filters, order, paging).
async fn select<C: GenericClient + Sync>(
    c: &C,
    shape: impl FnOnce(&mut SelectStatement),
) -> Result<Vec<WriteOff>> {
    let mut q = Query::select()
        .columns([
            ("w", "id"),
            ("w", "branch_id"),
            ("w", "reason"),
            ("w", "total_value"),
            ("w", "notes"),
            ("w", "witness_name"),
            ("w", "witness_user_id"),
            ("w", "created_by"),
            ("w", "created_at"),
        ])
        .expr_as(Expr::cust("coalesce(u.full_name, '')"), "created_by_name")
        .from_as(Table::WriteOffs, "w")
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("w", "created_by")),
        )
        .to_owned();
    shape(&mut q);
    let mut found: Vec<WriteOff> = db::fetch_all(c, &q)
        .await?
        .iter()
        .map(|r| WriteOff {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            reason: r.get("reason"),
            items: Vec::new(),
            total_value: r.get("total_value"),
            notes: r.get("notes"),
            witness_name: r.get("witness_name"),
            witness_user_id: r.get("witness_user_id"),
            created_by: r.get("created_by"),
            created_by_name: r.get("created_by_name"),
            created_at: r.get("created_at"),
        })
        .collect();
    left::attach(
        c,
        Document::WriteOff,
        &mut found,
        |w| w.id,
        |w| &mut w.items,
    )
    .await?;
    Ok(found)
}

/// One write-off with its lines.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<WriteOff>> {
    let found = select(c, |q| {
        q.and_where(Expr::col(("w", "id")).eq(id));
    })
    .await?;
    Ok(found.into_iter().next())
}

/// Filters of the write-off list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Newest first, paged; the page and the total.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<WriteOff>, i64)> {
    let filter = |q: &mut SelectStatement| {
        if let Some(b) = f.branch_id {
            q.and_where(Expr::col(("w", "branch_id")).eq(b));
        }
        if let Some(from) = f.from {
            q.and_where(Expr::col(("w", "created_at")).gte(from));
        }
        if let Some(until) = f.until {
            q.and_where(Expr::col(("w", "created_at")).lt(until));
        }
    };
    let mut list = Query::select().from_as(Table::WriteOffs, "w").to_owned();
    filter(&mut list);
    let total = paging::count(c, &list, ("w", "id")).await?;
    let items = select(c, |q| {
        filter(q);
        q.order_by(("w", "created_at"), Order::Desc)
            .order_by(("w", "id"), Order::Desc);
        page.apply(q);
    })
    .await?;
    Ok((items, total))
}

/// Most expired batches one answer lists (as many as one write-off takes).
pub const EXPIRED_LIST_MAX: i64 = MAX_LINES as i64;

/// A batch past its expiry date that still holds stock.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ExpiredBatch {
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: NaiveDate,
    /// Units the batch still holds.
    pub quantity: i32,
    /// Cost per base unit (4 places where it has them).
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String)]
    pub unit_cost: Decimal,
    /// quantity × unit cost.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub value: Decimal,
    /// A write-off of it needs a `witness_name`.
    pub is_controlled: bool,
    pub regulator_status: String,
}

/// The branch's expired batches holding stock (expiry before the
/// organisation's today, any regulator status), oldest expiry first.
pub async fn expired<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<Vec<ExpiredBatch>> {
    let limit = EXPIRED_LIST_MAX;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT b.id, b.medicine_id, m.name, b.batch_number, b.expiry_date, b.qty_remaining,
                  b.unit_cost,
                  batch_value(b.qty_remaining, b.unit_cost, b.received_total, b.qty_received),
                  m.is_controlled,
                  b.regulator_status
           FROM batches b JOIN medicines m ON m.id = b.medicine_id
           WHERE b.branch_id = {branch_id} AND b.qty_remaining > 0 AND NOT b.is_deleted
             AND b.expiry_date < org_today()
           ORDER BY b.expiry_date, m.name, b.id
           LIMIT {limit}"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| ExpiredBatch {
            batch_id: r.get(0),
            medicine_id: r.get(1),
            medicine_name: r.get(2),
            batch_number: r.get(3),
            expiry_date: r.get(4),
            quantity: r.get(5),
            unit_cost: r.get(6),
            value: r.get(7),
            is_controlled: r.get(8),
            regulator_status: r.get(9),
        })
        .collect())
}

/// One line of the destruction register: a controlled medicine written off.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct DestructionRow {
    /// The write-off line.
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub write_off_id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub written_off_at: DateTime<Utc>,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    pub control_schedule: String,
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    pub batch_number: String,
    pub quantity: i32,
    /// `expired`, `damaged`, `recalled`, `lost` or `other`.
    pub reason: String,
    /// The witness's name (as typed, or the witnessing user's name then).
    pub witness_name: String,
    /// How the witness was given: `user` (a user of the branch, named by
    /// `witness_user_id`) or `name` (a name typed in).
    pub witness_kind: String,
    #[schema(value_type = Option<String>)]
    pub witness_user_id: Option<Uuid>,
    pub written_off_by_name: String,
}

/// Every write-off line of a medicine that was controlled when written off,
/// newest first.
pub async fn destruction_register<C: GenericClient + Sync>(
    c: &C,
    scope: books::Scope,
    paging: books::Paging,
) -> Result<(Vec<DestructionRow>, i64)> {
    let mut base = Query::select()
        .from_as(Table::WriteOffItems, "i")
        .join_as(
            JoinType::InnerJoin,
            Table::WriteOffs,
            "w",
            Expr::col(("w", "id")).equals(("i", "write_off_id")),
        )
        .and_where(Expr::col(("i", "is_controlled")).eq(true))
        .to_owned();
    if let Some(b) = scope.branch_id {
        base.and_where(Expr::col(("w", "branch_id")).eq(b));
    }
    if let Some(start) = scope.bounds.0 {
        base.and_where(Expr::col(("w", "created_at")).gte(start));
    }
    if let Some(end) = scope.bounds.1 {
        base.and_where(Expr::col(("w", "created_at")).lt(end));
    }
    let (rows, total) = paging::fetch(c, base, ("i", "id"), paging, |q| {
        q.columns([
            ("i", "id"),
            ("i", "write_off_id"),
            ("i", "medicine_id"),
            ("i", "batch_id"),
            ("i", "quantity"),
            ("i", "witness_name"),
            ("i", "witness_user_id"),
        ])
        .columns([("w", "branch_id"), ("w", "reason")])
        .expr_as(Expr::col(("w", "created_at")), "written_off_at")
        .expr_as(Expr::col(("m", "name")), "medicine_name")
        .expr_as(Expr::col(("m", "control_schedule")), "control_schedule")
        .expr_as(Expr::col(("b", "batch_number")), "batch_number")
        .expr_as(
            Expr::cust("coalesce(u.full_name, '')"),
            "written_off_by_name",
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
            Expr::col(("u", "id")).equals(("w", "created_by")),
        )
        .order_by(("w", "created_at"), Order::Desc)
        .order_by(("i", "id"), Order::Desc);
    })
    .await?;
    let items = rows
        .iter()
        .map(|r: &Row| DestructionRow {
            id: r.get("id"),
            write_off_id: r.get("write_off_id"),
            branch_id: r.get("branch_id"),
            written_off_at: r.get("written_off_at"),
            medicine_id: r.get("medicine_id"),
            medicine_name: r.get("medicine_name"),
            control_schedule: r.get("control_schedule"),
            batch_id: r.get("batch_id"),
            batch_number: r.get("batch_number"),
            quantity: r.get("quantity"),
            reason: r.get("reason"),
            witness_name: r.get("witness_name"),
            witness_kind: match r.get::<_, Option<Uuid>>("witness_user_id") {
                Some(_) => "user",
                None => "name",
            }
            .to_owned(),
            witness_user_id: r.get("witness_user_id"),
            written_off_by_name: r.get("written_off_by_name"),
        })
        .collect();
    Ok((items, total))
}
