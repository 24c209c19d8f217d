//! Devices (tills): the register of what may push, reads and writes.
//! Devices are not synced entities: tills never receive them in a snapshot.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::Pool;
use crate::{audit, branches, db, input, wire, Acting, Error, Result};

use crate::paging::{self, Page};

/// A till of one branch. `status` is `active` or `revoked`; a revoked
/// device stays in the register.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Device {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub name: String,
    /// `active` or `revoked`.
    pub status: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    /// The user who registered it.
    #[schema(value_type = Option<String>)]
    pub created_by: Option<Uuid>,
    /// Last push.
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub last_seen_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub revoked_at: Option<DateTime<Utc>>,
}

pub const ACTIVE: &str = "active";
pub const REVOKED: &str = "revoked";

pub const COLUMNS: [&str; 8] = [
    "id",
    "branch_id",
    "name",
    "status",
    "created_at",
    "created_by",
    "last_seen_at",
    "revoked_at",
];

impl Device {
    pub fn from_row(r: &Row) -> Self {
        Device {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            name: r.get("name"),
            status: r.get("status"),
            created_at: r.get("created_at"),
            created_by: r.get("created_by"),
            last_seen_at: r.get("last_seen_at"),
            revoked_at: r.get("revoked_at"),
        }
    }

    pub fn is_revoked(&self) -> bool {
        self.status == REVOKED
    }
}

/// A row of the device register: the device and its branch's name.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RegisterRow {
    #[serde(flatten)]
    pub device: Device,
    pub branch_name: String,
}

fn select() -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Table::Devices)
        .to_owned()
}

pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Device>> {
    let q = select().and_where(Expr::col("id").eq(id)).to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Device::from_row(&r)))
}

/// The device, row-locked until the transaction ends (revocation).
pub async fn lock<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Option<Device>> {
    let q = select()
        .and_where(Expr::col("id").eq(id))
        .lock(sea_query::LockType::Update)
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.map(|r| Device::from_row(&r)))
}

/// How stale `last_seen_at` may get: a device heard from again within this
/// is not written to.
pub const SEEN_EVERY: &str = "1 minute";

/// Records that the device was just heard from, at most once a minute: when
/// `last_seen_at` is less than a minute old the update matches no row, so a
/// push writes nothing here and costs no commit of its own.
pub async fn touch<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<()> {
    let q = Query::update()
        .table(Table::Devices)
        .value("last_seen_at", Expr::cust("now()"))
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::cust(format!(
            "(last_seen_at IS NULL OR last_seen_at < now() - interval '{SEEN_EVERY}')"
        )))
        .to_owned();
    db::execute(c, &q).await?;
    Ok(())
}

pub async fn insert<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
    name: &str,
    created_by: Uuid,
) -> Result<Device> {
    let q = Query::insert()
        .into_table(Table::Devices)
        .columns(["id", "branch_id", "name", "created_by"])
        .values_panic([
            Uuid::now_v7().into(),
            branch_id.into(),
            name.into(),
            created_by.into(),
        ])
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(Device::from_row(&db::fetch_one(c, &q).await?))
}

/// Revokes an active device; `None` when it is not active (already revoked
/// or unknown), so a second revocation changes nothing.
pub async fn revoke<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Option<Device>> {
    let q = Query::update()
        .table(Table::Devices)
        .value("status", REVOKED)
        .value("revoked_at", Expr::cust("now()"))
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("status").eq(ACTIVE))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.map(|r| Device::from_row(&r)))
}

/// The register, newest first, optionally of one branch; with the total.
pub async fn register<C: GenericClient + Sync>(
    c: &C,
    branch_id: Option<Uuid>,
    page: Page,
) -> Result<(Vec<RegisterRow>, i64)> {
    let mut base = Query::select()
        .from_as(Table::Devices, "d")
        .join_as(
            JoinType::InnerJoin,
            Table::Branches,
            "b",
            Expr::col(("b", "id")).equals(("d", "branch_id")),
        )
        .to_owned();
    if let Some(branch_id) = branch_id {
        base.and_where(Expr::col(("d", "branch_id")).eq(branch_id));
    }
    let (rows, total) = paging::fetch(c, base, ("d", "id"), page, |q| {
        q.columns(COLUMNS.map(|col| ("d", col)))
            .expr_as(Expr::col(("b", "name")), "branch_name")
            .order_by(("d", "created_at"), Order::Desc)
            .order_by(("d", "id"), Order::Desc);
    })
    .await?;
    let items = rows
        .iter()
        .map(|r| RegisterRow {
            device: Device::from_row(r),
            branch_name: r.get("branch_name"),
        })
        .collect();
    Ok((items, total))
}

fn not_found() -> Error {
    Error::not_found("Device not found")
}

/// Registers a till named `name` on `branch_id` (already the caller's to
/// name) for `acting`, audited as `device.create`: an unknown or deleted
/// branch is 400 naming `branch_id`.
pub async fn register_till(
    pool: &Pool,
    acting: &Acting,
    branch_id: Uuid,
    name: &str,
) -> Result<Device> {
    let name = input::required_text("name", name, input::max::NAME)?;
    let mut client = pool.get().await?;
    if branches::get(&client, branch_id).await?.is_none() {
        return Err(Error::validation(
            "branch_id",
            "There is no such branch (it may have been deleted).",
        ));
    }
    let tx = client.transaction().await?;
    let device = insert(&tx, branch_id, &name, acting.user_id).await?;
    audit_device(&tx, acting, "device.create", None, &device).await?;
    crate::db::commit(tx).await?;
    Ok(device)
}

/// Revokes till `id` for `acting` (403 for another branch's till unless
/// the caller works on any branch), audited as `device.revoke`. A revoked
/// till is answered unchanged, with no second audit entry: the row is
/// locked, so two revocations write one entry between them.
pub async fn revoke_till(pool: &Pool, acting: &Acting, id: Uuid) -> Result<Device> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let before = lock(&tx, id).await?.ok_or_else(not_found)?;
    acting.branch_scope(Some(before.branch_id))?;
    if before.is_revoked() {
        return Ok(before);
    }
    let after = revoke(&tx, id).await?.ok_or_else(not_found)?;
    audit_device(&tx, acting, "device.revoke", Some(&before), &after).await?;
    crate::db::commit(tx).await?;
    Ok(after)
}

async fn audit_device<C: GenericClient + Sync>(
    tx: &C,
    acting: &Acting,
    action: &str,
    before: Option<&Device>,
    after: &Device,
) -> Result<()> {
    let json = |d: &Device| serde_json::to_value(d).map_err(Error::internal);
    audit::write_for(
        tx,
        Some(after.branch_id),
        audit::Entry {
            actor_id: Some(acting.user_id),
            action,
            entity_type: "device",
            entity_id: after.id.to_string(),
            before: before.map(json).transpose()?,
            after: Some(json(after)?),
        },
    )
    .await
}
