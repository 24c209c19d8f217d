//! Suppliers: the snapshot shape (numbers, 0/1 flags) used on every read,
//! reads and writes with their sync changes.

pub mod committed;
pub mod invoices;
pub mod matching;

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::extension::postgres::PgExpr;
use sea_query::{Cond, Expr, ExprTrait, Iden, Order, Query};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::input::{self, max, Flag};
use crate::sync::changes::{self, Change, Op};
use crate::{db, wire, Error, Result};

use crate::paging::{self, Page};
use crate::patch::Patch;
use crate::sync::synced;
use crate::users::escape_like;

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
    pub fn from_row(r: &Row) -> Self {
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
        .from(Table::Suppliers)
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
    let mut base = Query::select().from(Table::Suppliers).to_owned();
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
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(COLUMNS)
            .order_by_expr(Expr::cust("lower(name)"), Order::Asc)
            .order_by("id", Order::Asc);
    })
    .await?;
    let items = rows.iter().map(Supplier::from_row).collect();
    Ok((items, total))
}

/// The supplier columns a write sets.
#[derive(Iden, Clone, Copy)]
pub enum SupplierColumn {
    Id,
    Name,
    TaxNumber,
    ContactPerson,
    Phone,
    Email,
    Address,
    ImageUrl,
    SupplierType,
    LeadTimeDays,
    ReliabilityScore,
    IsActive,
    IsDeleted,
}

/// A checked supplier write.
pub type Fields = Patch<SupplierColumn>;

/// Create (`name` required) or update body. An update applies only these
/// fields (the allowlist); anything else is ignored.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct SupplierWrite {
    pub name: Option<String>,
    pub tax_number: Option<String>,
    pub contact_person: Option<String>,
    pub phone: Option<String>,
    pub email: Option<String>,
    pub address: Option<String>,
    pub image_url: Option<String>,
    /// Default `distributor`.
    pub supplier_type: Option<String>,
    /// Whole days, 0..365 (default 7).
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 365)]
    pub lead_time_days: Option<Decimal>,
    /// 0..100 (default 100).
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 100)]
    pub reliability_score: Option<Decimal>,
    /// Updates only: reactivate (true) or deactivate (false).
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Flag>,
}

pub fn fields(body: SupplierWrite) -> Result<Fields> {
    use SupplierColumn as Col;
    let mut f = Fields::new();
    if let Some(v) = body.name {
        f.set(Col::Name, input::required_text("name", &v, max::NAME)?);
    }
    if let Some(v) = body.supplier_type {
        let v = input::required_text("supplier_type", &v, max::CODE)?.to_lowercase();
        f.set(Col::SupplierType, v);
    }
    for (col, v, limit) in [
        (Col::TaxNumber, body.tax_number, max::CODE),
        (Col::ContactPerson, body.contact_person, max::NAME),
        (Col::Phone, body.phone, max::CODE),
        (Col::Email, body.email, max::EMAIL),
        (Col::Address, body.address, max::ADDRESS),
        (Col::ImageUrl, body.image_url, max::URL),
    ] {
        if let Some(v) = v {
            f.set(col, input::text(col.unquoted(), &v, limit)?);
        }
    }
    if let Some(v) = body.lead_time_days {
        let days = input::whole("lead_time_days", v, 0)?;
        if days > 365 {
            return Err(Error::validation(
                "lead_time_days",
                "`lead_time_days` must be at most 365.",
            ));
        }
        f.set(Col::LeadTimeDays, days);
    }
    if let Some(v) = body.reliability_score {
        let v = input::amount("reliability_score", v)?;
        if v > Decimal::ONE_HUNDRED {
            return Err(Error::validation(
                "reliability_score",
                "`reliability_score` must be between 0 and 100.",
            ));
        }
        f.set(Col::ReliabilityScore, v);
    }
    if let Some(Flag(v)) = body.is_active {
        f.set(Col::IsActive, v);
    }
    Ok(f)
}

/// Creates an active supplier (`name` required); `id` when the client chose it.
pub async fn create<C: GenericClient + Sync>(
    tx: &C,
    mut body: SupplierWrite,
    id: Option<Uuid>,
) -> Result<Supplier> {
    if body.name.is_none() {
        return Err(Error::validation("name", "The field `name` is required."));
    }
    body.is_active = None;
    let mut fields = fields(body)?;
    if let Some(id) = id {
        fields.set(SupplierColumn::Id, id);
    }
    insert(tx, fields).await
}

/// Applies the allowlisted fields present in `body` to a live supplier.
pub async fn edit<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    body: SupplierWrite,
) -> Result<Supplier> {
    let fields = fields(body)?;
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    update(tx, id, fields, Op::Update)
        .await?
        .ok_or_else(|| Error::not_found("Supplier not found"))
}

/// Soft-deletes (and deactivates) a live supplier.
pub async fn remove<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Supplier> {
    let mut fields = Fields::of(SupplierColumn::IsDeleted, true);
    fields.set(SupplierColumn::IsActive, false);
    update(tx, id, fields, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("Supplier not found"))
}

pub async fn insert<C: GenericClient + Sync>(tx: &C, fields: Fields) -> Result<Supplier> {
    let (row, rev) = synced::insert(tx, Table::Suppliers, &COLUMNS, fields).await?;
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
    let Some((row, rev)) = synced::update(tx, Table::Suppliers, &COLUMNS, id, fields).await? else {
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
