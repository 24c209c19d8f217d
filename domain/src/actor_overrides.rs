//! Per-branch actor tuning stored in the database
//! (`branch_actor_overrides`), and how it combines with the static
//! overrides of the configuration (by branch code) into what each server
//! process applies.

use crate::tables::Table;
use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Func, JoinType, LockType, OnConflict, Query};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::{db, BranchOverride, Result};

const TABLE: &str = "branch_actor_overrides";
const COLUMNS: [&str; 5] = [
    "branch_id",
    "mailbox",
    "sale_batch_max",
    "updated_by",
    "updated_at",
];

/// One stored override: `null` fields keep the configured value.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Stored {
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(example = 512)]
    pub mailbox: Option<i32>,
    #[schema(example = 64)]
    pub sale_batch_max: Option<i32>,
    #[schema(value_type = Option<String>)]
    pub updated_by: Option<Uuid>,
    #[serde(serialize_with = "crate::wire::ts")]
    #[schema(value_type = String, example = "2026-11-21T09:05:03.120Z")]
    pub updated_at: DateTime<Utc>,
}

impl Stored {
    fn from_row(r: &Row) -> Self {
        Stored {
            branch_id: r.get("branch_id"),
            mailbox: r.get("mailbox"),
            sale_batch_max: r.get("sale_batch_max"),
            updated_by: r.get("updated_by"),
            updated_at: r.get("updated_at"),
        }
    }

    pub fn as_override(&self) -> BranchOverride {
        BranchOverride {
            mailbox: self.mailbox.and_then(|n| usize::try_from(n).ok()),
            batch_max: self.sale_batch_max.and_then(|n| usize::try_from(n).ok()),
        }
    }
}

/// Every stored override of a live branch: `(branch, its upper-case code,
/// the override)`.
pub async fn all<C: GenericClient + Sync>(c: &C) -> Result<Vec<(String, Stored)>> {
    let mut q = Query::select();
    for col in COLUMNS {
        q.column(("o", col));
    }
    let q = q
        .expr_as(Func::upper(Expr::col(("b", "code"))), "code")
        .from_as(TABLE, "o")
        .join_as(
            JoinType::InnerJoin,
            Table::Branches,
            "b",
            Expr::col(("b", "id")).equals(("o", "branch_id")),
        )
        .and_where(Expr::col(("b", "is_deleted")).eq(false))
        .to_owned();
    let rows = db::fetch_all(c, &q).await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>("code"), Stored::from_row(r)))
        .collect())
}

/// Live branches whose code (any case) is one of `codes`: `(id, upper code)`.
pub async fn branches_by_code<C: GenericClient + Sync>(
    c: &C,
    codes: &[String],
) -> Result<Vec<(Uuid, String)>> {
    if codes.is_empty() {
        return Ok(Vec::new());
    }
    let q = Query::select()
        .column("id")
        .expr_as(Func::upper(Expr::col("code")), "code")
        .from(Table::Branches)
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Func::upper(Expr::col("code")).is_in(codes.iter().cloned()))
        .to_owned();
    let rows = db::fetch_all(c, &q).await?;
    Ok(rows.iter().map(|r| (r.get("id"), r.get("code"))).collect())
}

/// The stored override of one branch.
pub async fn get<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<Option<Stored>> {
    let q = Query::select()
        .columns(COLUMNS)
        .from(TABLE)
        .and_where(Expr::col("branch_id").eq(branch_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Stored::from_row(&r)))
}

/// A live branch of the organisation, locked against a concurrent change of
/// its tuning (`FOR NO KEY UPDATE`: rows that reference the branch are not
/// held up); its upper-case code, or `None`.
pub async fn lock_branch<C: GenericClient + Sync>(
    tx: &C,
    org_id: Uuid,
    branch_id: Uuid,
) -> Result<Option<String>> {
    let q = Query::select()
        .column("code")
        .from(Table::Branches)
        .and_where(Expr::col("id").eq(branch_id))
        .and_where(Expr::col("org_id").eq(org_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .lock(LockType::NoKeyUpdate)
        .to_owned();
    Ok(db::fetch_opt(tx, &q)
        .await?
        .map(|r| r.get::<_, String>(0).to_uppercase()))
}

/// A live branch of the organisation: its upper-case code, or `None`.
pub async fn branch_code<C: GenericClient + Sync>(
    c: &C,
    org_id: Uuid,
    branch_id: Uuid,
) -> Result<Option<String>> {
    let q = Query::select()
        .column("code")
        .from(Table::Branches)
        .and_where(Expr::col("id").eq(branch_id))
        .and_where(Expr::col("org_id").eq(org_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q)
        .await?
        .map(|r| r.get::<_, String>(0).to_uppercase()))
}

/// Sets the branch's override (both fields: `None` clears one).
pub async fn put<C: GenericClient + Sync>(
    tx: &C,
    branch_id: Uuid,
    mailbox: Option<i32>,
    sale_batch_max: Option<i32>,
    by: Uuid,
) -> Result<Stored> {
    let q = Query::insert()
        .into_table(TABLE)
        .columns(["branch_id", "mailbox", "sale_batch_max", "updated_by"])
        .values_panic([
            branch_id.into(),
            mailbox.into(),
            sale_batch_max.into(),
            by.into(),
        ])
        .on_conflict(
            OnConflict::column("branch_id")
                .update_columns(["mailbox", "sale_batch_max", "updated_by"])
                .value("updated_at", Expr::current_timestamp())
                .to_owned(),
        )
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(Stored::from_row(&db::fetch_one(tx, &q).await?))
}

/// Removes the branch's override; the removed row, if there was one.
pub async fn remove<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<Option<Stored>> {
    let q = Query::delete()
        .from_table(TABLE)
        .and_where(Expr::col("branch_id").eq(branch_id))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.map(|r| Stored::from_row(&r)))
}

/// Branches of the organisation among `ids` (deleted ones included):
/// id to upper-case code.
pub async fn codes_of<C: GenericClient + Sync>(
    c: &C,
    org_id: Uuid,
    ids: Vec<Uuid>,
) -> Result<HashMap<Uuid, String>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let q = Query::select()
        .column("id")
        .expr_as(Func::upper(Expr::col("code")), "code")
        .from(Table::Branches)
        .and_where(Expr::col("org_id").eq(org_id))
        .and_where(Expr::col("id").is_in(ids))
        .to_owned();
    let rows = db::fetch_all(c, &q).await?;
    Ok(rows.iter().map(|r| (r.get("id"), r.get("code"))).collect())
}

/// Devices of the organisation among `ids`: id to (branch id, upper-case
/// branch code).
pub async fn devices_of<C: GenericClient + Sync>(
    c: &C,
    org_id: Uuid,
    ids: Vec<Uuid>,
) -> Result<HashMap<Uuid, (Uuid, String)>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let q = Query::select()
        .column(("d", "id"))
        .column(("d", "branch_id"))
        .expr_as(Func::upper(Expr::col(("b", "code"))), "code")
        .from_as(Table::Devices, "d")
        .join_as(
            JoinType::InnerJoin,
            Table::Branches,
            "b",
            Expr::col(("b", "id")).equals(("d", "branch_id")),
        )
        .and_where(Expr::col(("b", "org_id")).eq(org_id))
        .and_where(Expr::col(("d", "id")).is_in(ids))
        .to_owned();
    let rows = db::fetch_all(c, &q).await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("id"), (r.get("branch_id"), r.get("code"))))
        .collect())
}

/// A stored override wins over the static one of the branch's code, field
/// by field; a field neither sets keeps the default.
pub fn merge(stored: Option<BranchOverride>, configured: Option<BranchOverride>) -> BranchOverride {
    let s = stored.unwrap_or_default();
    let c = configured.unwrap_or_default();
    BranchOverride {
        mailbox: s.mailbox.or(c.mailbox),
        batch_max: s.batch_max.or(c.batch_max),
    }
}

/// What every process applies: the stored overrides and the static ones
/// (by upper-case code), combined per branch id.
pub async fn effective<C: GenericClient + Sync>(
    c: &C,
    configured: &BTreeMap<String, BranchOverride>,
) -> Result<HashMap<Uuid, BranchOverride>> {
    let codes: Vec<String> = configured.keys().cloned().collect();
    let mut out: HashMap<Uuid, BranchOverride> = HashMap::new();
    for (id, code) in branches_by_code(c, &codes).await? {
        out.insert(id, merge(None, configured.get(&code).copied()));
    }
    for (code, s) in all(c).await? {
        let merged = merge(Some(s.as_override()), configured.get(&code).copied());
        out.insert(s.branch_id, merged);
    }
    out.retain(|_, o| *o != BranchOverride::default());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(mailbox: Option<usize>, batch: Option<usize>) -> BranchOverride {
        BranchOverride {
            mailbox,
            batch_max: batch,
        }
    }

    #[test]
    fn stored_fields_win_over_configured_ones_field_by_field() {
        assert_eq!(merge(None, None), o(None, None));
        assert_eq!(merge(None, Some(o(Some(8), Some(4)))), o(Some(8), Some(4)));
        assert_eq!(
            merge(Some(o(Some(512), None)), Some(o(Some(8), Some(4)))),
            o(Some(512), Some(4))
        );
        assert_eq!(merge(Some(o(None, Some(64))), None), o(None, Some(64)));
    }
}
