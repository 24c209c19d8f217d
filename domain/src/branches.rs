//! Branches: the snapshot Branch shape, reads and writes.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Iden, Order, Query, SelectStatement};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::sync::changes::{self, Change, Op};

use crate::db::Pool;
use crate::input::{self, max};
use crate::patch::Patch;
use crate::sync::synced;
use crate::{db, wire, Acting, Error, Result};

/// The snapshot Branch shape (flags as 0/1), plus `currency_code` and `rev`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Branch {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub code: String,
    pub name: String,
    pub city: String,
    pub vat_number: String,
    pub address: String,
    pub image_url: String,
    pub currency_code: String,
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

pub const COLUMNS: [&str; 13] = [
    "id",
    "code",
    "name",
    "city",
    "vat_number",
    "address",
    "image_url",
    "currency_code",
    "is_active",
    "is_deleted",
    "rev",
    "created_at",
    "updated_at",
];

impl Branch {
    pub fn from_row(r: &Row) -> Self {
        Branch {
            id: r.get("id"),
            code: r.get("code"),
            name: r.get("name"),
            city: r.get("city"),
            vat_number: r.get("vat_number"),
            address: r.get("address"),
            image_url: r.get("image_url"),
            currency_code: r.get("currency_code"),
            is_active: r.get("is_active"),
            is_deleted: r.get("is_deleted"),
            rev: r.get("rev"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

fn select() -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Table::Branches)
        .to_owned()
}

/// The live branch a request's `branch_id` names: 400 naming the field
/// when there is none.
pub async fn named<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Branch> {
    get(c, id)
        .await?
        .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))
}

/// A live (not deleted) branch by id.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Branch>> {
    let q = select()
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Branch::from_row(&r)))
}

/// Live branches, optionally only one, ordered by code.
pub async fn list<C: GenericClient + Sync>(c: &C, only: Option<Uuid>) -> Result<Vec<Branch>> {
    let q = select()
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(only, |q, id| {
            q.and_where(Expr::col("id").eq(id));
        })
        .order_by("code", Order::Asc)
        .to_owned();
    Ok(db::fetch_all(c, &q)
        .await?
        .iter()
        .map(Branch::from_row)
        .collect())
}

/// Fields a branch write may set.
#[derive(Debug, Default)]
pub struct BranchFields {
    pub code: Option<String>,
    pub name: Option<String>,
    pub city: Option<String>,
    pub vat_number: Option<String>,
    pub address: Option<String>,
    pub image_url: Option<String>,
    pub currency_code: Option<String>,
    pub is_active: Option<bool>,
}

impl BranchFields {
    pub fn is_empty(&self) -> bool {
        self.code.is_none()
            && self.name.is_none()
            && self.city.is_none()
            && self.vat_number.is_none()
            && self.address.is_none()
            && self.image_url.is_none()
            && self.currency_code.is_none()
            && self.is_active.is_none()
    }

    fn patch(self) -> Patch<BranchColumn> {
        use BranchColumn as Col;
        let mut p = Patch::new();
        let strings = [
            (Col::Code, self.code),
            (Col::Name, self.name),
            (Col::City, self.city),
            (Col::VatNumber, self.vat_number),
            (Col::Address, self.address),
            (Col::ImageUrl, self.image_url),
            (Col::CurrencyCode, self.currency_code),
        ];
        for (col, val) in strings {
            if let Some(val) = val {
                p.set(col, val);
            }
        }
        if let Some(active) = self.is_active {
            p.set(Col::IsActive, active);
        }
        p
    }
}

/// The branch columns a write sets.
#[derive(Iden, Clone, Copy)]
enum BranchColumn {
    OrgId,
    Code,
    Name,
    City,
    VatNumber,
    Address,
    ImageUrl,
    CurrencyCode,
    IsActive,
    IsDeleted,
}

pub async fn insert<C: GenericClient + Sync>(
    tx: &C,
    org_id: Uuid,
    f: BranchFields,
) -> Result<Branch> {
    let mut fields = f.patch();
    fields.set(BranchColumn::OrgId, org_id);
    let (row, rev) = synced::insert(tx, Table::Branches, &COLUMNS, fields).await?;
    let branch = Branch::from_row(&row);
    crate::sales::ensure_counter(tx, branch.id).await?;
    emit(tx, rev, &branch, Op::Create).await?;
    Ok(branch)
}

pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    f: BranchFields,
) -> Result<Option<Branch>> {
    set(tx, id, f.patch(), Op::Update).await
}

pub async fn soft_delete<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Option<Branch>> {
    let mut patch = Patch::of(BranchColumn::IsDeleted, true);
    patch.set(BranchColumn::IsActive, false);
    set(tx, id, patch, Op::Delete).await
}

/// Sets columns on a live branch and records the change; `None` when there is none.
async fn set<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    patch: Patch<BranchColumn>,
    op: Op,
) -> Result<Option<Branch>> {
    let Some((row, rev)) = synced::update(tx, Table::Branches, &COLUMNS, id, patch).await? else {
        return Ok(None);
    };
    let branch = Branch::from_row(&row);
    emit(tx, rev, &branch, op).await?;
    Ok(Some(branch))
}

async fn emit<C: GenericClient + Sync>(tx: &C, rev: i64, b: &Branch, op: Op) -> Result<()> {
    let change = Change {
        entity: "branch",
        entity_id: b.id.to_string(),
        op,
        branch_id: Some(b.id),
        payload: serde_json::to_value(b).map_err(crate::Error::internal)?,
    };
    changes::append(tx, rev, change).await
}

/// Whether an active currency with this code exists.
pub async fn currency_active<C: GenericClient + Sync>(c: &C, code: &str) -> Result<bool> {
    let q = Query::select()
        .expr(Expr::cust("1"))
        .from(Table::Currencies)
        .and_where(Expr::col("code").eq(code))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.is_some())
}

/// Active users still attached to the branch.
pub async fn active_user_count<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<i64> {
    let q = Query::select()
        .expr(Expr::col("id").count())
        .from(Table::Users)
        .and_where(Expr::col("branch_id").eq(id))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned();
    Ok(db::fetch_one(c, &q).await?.get(0))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct BranchCreate {
    pub code: String,
    pub name: String,
    pub city: Option<String>,
    pub vat_number: Option<String>,
    pub address: Option<String>,
    pub image_url: Option<String>,
    /// Defaults to the organisation's base currency.
    pub currency_code: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BranchUpdate {
    pub code: Option<String>,
    pub name: Option<String>,
    pub city: Option<String>,
    pub vat_number: Option<String>,
    pub address: Option<String>,
    pub image_url: Option<String>,
    pub currency_code: Option<String>,
    pub is_active: Option<bool>,
}

fn required(field: &str, value: &str) -> Result<String> {
    input::required_text(field, value, max::NAME)
}

fn optional(field: &str, value: Option<String>, limit: usize) -> Result<Option<String>> {
    value.map(|v| input::text(field, &v, limit)).transpose()
}

/// Longest branch code: it prefixes every invoice number of the branch.
pub const MAX_CODE: usize = 32;

fn code(value: &str) -> Result<String> {
    let c = required("code", value)?.to_uppercase();
    // Bytes, but only ASCII passes the next test, so characters too.
    if c.len() > MAX_CODE
        || !c
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
    {
        return Err(Error::validation(
            "code",
            format!("`code` must be up to {MAX_CODE} letters, digits, `-` or `_`."),
        ));
    }
    Ok(c)
}

async fn currency<C: GenericClient + Sync>(client: &C, code: &str) -> Result<String> {
    let c = code.trim().to_uppercase();
    if !currency_active(client, &c).await? {
        return Err(Error::validation(
            "currency_code",
            format!("`{c}` is not an active currency."),
        ));
    }
    Ok(c)
}

fn duplicate_code(e: Error) -> Error {
    match e {
        Error::Conflict(_) => Error::conflict("A branch with this code already exists."),
        other => other,
    }
}

/// Creates a branch in `acting`'s organisation; its currency defaults to
/// the base currency (409 for a code in use).
pub async fn create_branch(pool: &Pool, acting: &Acting, body: BranchCreate) -> Result<Branch> {
    let mut client = pool.get().await?;
    let currency_code = match body.currency_code.as_deref() {
        Some(c) => currency(&client, c).await?,
        None => base_currency(&client).await?,
    };
    let fields = BranchFields {
        code: Some(code(&body.code)?),
        name: Some(required("name", &body.name)?),
        city: optional("city", body.city, max::LABEL)?,
        vat_number: optional("vat_number", body.vat_number, max::CODE)?,
        address: optional("address", body.address, max::ADDRESS)?,
        image_url: optional("image_url", body.image_url, max::URL)?,
        currency_code: Some(currency_code),
        is_active: None,
    };
    let tx = client.transaction().await?;
    let branch = insert(&tx, acting.org_id, fields)
        .await
        .map_err(duplicate_code)?;
    crate::db::commit(tx).await?;
    Ok(branch)
}

async fn base_currency<C: GenericClient + Sync>(client: &C) -> Result<String> {
    let q = Query::select()
        .column("base_currency")
        .from(Table::Settings)
        .to_owned();
    Ok(db::fetch_opt(client, &q)
        .await?
        .map(|r| r.get(0))
        .unwrap_or_else(|| "UGX".to_owned()))
}

/// Changes the fields sent of branch `id` (404 when there is none, 409 for
/// a code in use).
pub async fn update_branch(pool: &Pool, id: Uuid, body: BranchUpdate) -> Result<Branch> {
    let mut client = pool.get().await?;
    let currency_code = match body.currency_code.as_deref() {
        Some(c) => Some(currency(&client, c).await?),
        None => None,
    };
    let fields = BranchFields {
        code: body.code.as_deref().map(code).transpose()?,
        name: body
            .name
            .as_deref()
            .map(|n| required("name", n))
            .transpose()?,
        city: optional("city", body.city, max::LABEL)?,
        vat_number: optional("vat_number", body.vat_number, max::CODE)?,
        address: optional("address", body.address, max::ADDRESS)?,
        image_url: optional("image_url", body.image_url, max::URL)?,
        currency_code,
        is_active: body.is_active,
    };
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let tx = client.transaction().await?;
    let branch = update(&tx, id, fields)
        .await
        .map_err(duplicate_code)?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    crate::db::commit(tx).await?;
    Ok(branch)
}

/// Soft-deletes branch `id` for `acting`: 409 while it has active users or
/// is the caller's own.
pub async fn delete_branch(pool: &Pool, acting: &Acting, id: Uuid) -> Result<()> {
    if id == acting.branch_id {
        return Err(Error::conflict(
            "You cannot delete the branch you belong to.",
        ));
    }
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    if active_user_count(&tx, id).await? > 0 {
        return Err(Error::conflict(
            "The branch still has active users; move or deactivate them first.",
        ));
    }
    soft_delete(&tx, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    crate::db::commit(tx).await?;
    Ok(())
}
