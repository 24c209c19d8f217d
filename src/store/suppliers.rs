//! Suppliers: the snapshot shape (numbers, 0/1 flags) used on every read,
//! reads and writes with their sync changes.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Order, Query};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use actors::changes::{self, Change, Op};
use actors::{db, wire, Error, Result};

use crate::http::extract::Page;
use crate::store::synced;
use crate::store::users::escape_like;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Supplier {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub name: String,
    pub tax_number: String,
    pub contact_person: String,
    pub phone: String,
    pub email: String,
    pub address: String,
    pub image_url: String,
    pub supplier_type: String,
    pub lead_time_days: i32,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub reliability_score: Decimal,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_active: bool,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_deleted: bool,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

pub const COLUMNS: [&str; 16] = [
    "id",
    "name",
    "tax_number",
    "contact_person",
    "phone",
    "email",
    "address",
    "image_url",
    "supplier_type",
    "lead_time_days",
    "reliability_score",
    "is_active",
    "is_deleted",
    "rev",
    "created_at",
    "updated_at",
];

impl Supplier {
    fn from_row(r: &Row) -> Self {
        Supplier {
            id: r.get("id"),
            name: r.get("name"),
            tax_number: r.get("tax_number"),
            contact_person: r.get("contact_person"),
            phone: r.get("phone"),
            email: r.get("email"),
            address: r.get("address"),
            image_url: r.get("image_url"),
            supplier_type: r.get("supplier_type"),
            lead_time_days: r.get("lead_time_days"),
            reliability_score: r.get("reliability_score"),
            is_active: r.get("is_active"),
            is_deleted: r.get("is_deleted"),
            rev: r.get("rev"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

/// An active, live supplier (deactivated ones read as missing).
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Supplier>> {
    let q = Query::select()
        .columns(COLUMNS)
        .from("suppliers")
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Supplier::from_row(&r)))
}

/// Which suppliers a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Active and not deleted (the default).
    Active,
    /// Deactivated or deleted.
    Inactive,
    All,
}

pub async fn list<C: GenericClient + Sync>(
    c: &C,
    search: Option<&str>,
    activity: Activity,
    page: Page,
) -> Result<(Vec<Supplier>, i64)> {
    let mut base = Query::select().from("suppliers").to_owned();
    match activity {
        Activity::Active => {
            base.and_where(Expr::col("is_active").eq(true))
                .and_where(Expr::col("is_deleted").eq(false));
        }
        Activity::Inactive => {
            base.cond_where(
                Cond::any()
                    .add(Expr::col("is_active").eq(false))
                    .add(Expr::col("is_deleted").eq(true)),
            );
        }
        Activity::All => {}
    }
    if let Some(s) = search.map(str::trim).filter(|s| !s.is_empty()) {
        let pattern = format!("%{}%", escape_like(s));
        base.cond_where(
            Cond::any()
                .add(Expr::col("name").ilike(pattern.clone()))
                .add(Expr::col("tax_number").ilike(pattern)),
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
        .map(Supplier::from_row)
        .collect();
    Ok((items, total))
}

pub use crate::store::synced::Fields;

pub async fn insert<C: GenericClient + Sync>(tx: &C, fields: Fields) -> Result<Supplier> {
    let (row, rev) = synced::insert(tx, "suppliers", &COLUMNS, fields).await?;
    let supplier = Supplier::from_row(&row);
    emit(tx, rev, &supplier, Op::Create).await?;
    Ok(supplier)
}

/// Updates (or with `Op::Delete` soft-deletes) a live supplier.
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    fields: Fields,
    op: Op,
) -> Result<Option<Supplier>> {
    let Some((row, rev)) = synced::update(tx, "suppliers", &COLUMNS, id, fields).await? else {
        return Ok(None);
    };
    let supplier = Supplier::from_row(&row);
    emit(tx, rev, &supplier, op).await?;
    Ok(Some(supplier))
}

async fn emit<C: GenericClient + Sync>(tx: &C, rev: i64, s: &Supplier, op: Op) -> Result<()> {
    let change = Change {
        entity: "supplier",
        entity_id: s.id.to_string(),
        op,
        branch_id: None,
        payload: serde_json::to_value(s).map_err(Error::internal)?,
    };
    changes::append(tx, rev, change).await
}
