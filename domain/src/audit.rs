//! The audit log: who changed what, when, with the before and after values.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query, SimpleExpr};
use serde_json::Value as Json;
use uuid::Uuid;

use crate::paging::{self, Page};
use crate::{db, Result};

pub struct Entry<'a> {
    pub actor_id: Option<Uuid>,
    pub action: &'a str,
    pub entity_type: &'a str,
    pub entity_id: String,
    pub before: Option<Json>,
    pub after: Option<Json>,
}

/// Writes an entry that belongs to its actor's branch (no branch without an
/// actor). Use [`write_for`] when the record belongs to a known branch or to
/// the whole organisation.
pub async fn write<C: GenericClient + Sync>(tx: &C, e: Entry<'_>) -> Result<()> {
    let actor_branch = Query::select()
        .column("branch_id")
        .from(Table::Users)
        .and_where(Expr::col("id").eq(e.actor_id))
        .to_owned();
    insert(tx, actor_branch.into(), e).await
}

/// Writes an entry that belongs to `branch`: the branch of the record it
/// describes, or `None` for an organisation-wide record (settings, the
/// catalogue), which every auditor reads.
pub async fn write_for<C: GenericClient + Sync>(
    tx: &C,
    branch: Option<Uuid>,
    e: Entry<'_>,
) -> Result<()> {
    insert(tx, branch.into(), e).await
}

async fn insert<C: GenericClient + Sync>(tx: &C, branch: SimpleExpr, e: Entry<'_>) -> Result<()> {
    let q = Query::insert()
        .into_table(Table::AuditLog)
        .columns([
            "id",
            "actor_id",
            "action",
            "entity_type",
            "entity_id",
            "before",
            "after",
            "branch_id",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            e.actor_id.into(),
            e.action.into(),
            e.entity_type.into(),
            e.entity_id.into(),
            e.before.into(),
            e.after.into(),
            branch,
        ])
        .to_owned();
    db::execute(tx, &q).await?;
    Ok(())
}

/// One audit-log entry as `GET /audit-log` answers it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct AuditRow {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = Option<String>)]
    pub actor_id: Option<Uuid>,
    /// The actor's full name; `null` when the entry has no actor.
    pub actor_name: Option<String>,
    pub action: String,
    pub entity_type: String,
    pub entity_id: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub before: Option<Json>,
    #[schema(value_type = Option<Object>)]
    pub after: Option<Json>,
    #[serde(serialize_with = "crate::wire::ts")]
    #[schema(value_type = String)]
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Filters of the audit-log list; instants are `[from, until)`.
#[derive(Debug, Default)]
pub struct ListFilter {
    pub entity_type: Option<String>,
    pub entity_id: Option<String>,
    pub actor_id: Option<Uuid>,
    /// One branch's entries and the organisation-wide ones (`None`: all).
    pub branch: Option<Uuid>,
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    pub until: Option<chrono::DateTime<chrono::Utc>>,
}

/// Entries newest first, with the total before paging.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<AuditRow>, i64)> {
    use sea_query::{JoinType, Order};
    let mut base = Query::select()
        .from_as(Table::AuditLog, "a")
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("a", "actor_id")),
        )
        .to_owned();
    if let Some(t) = &f.entity_type {
        base.and_where(Expr::col(("a", "entity_type")).eq(t.as_str()));
    }
    if let Some(id) = &f.entity_id {
        base.and_where(Expr::col(("a", "entity_id")).eq(id.as_str()));
    }
    if let Some(actor) = f.actor_id {
        base.and_where(Expr::col(("a", "actor_id")).eq(actor));
    }
    if let Some(branch) = f.branch {
        base.and_where(
            Expr::col(("a", "branch_id"))
                .eq(branch)
                .or(Expr::col(("a", "branch_id")).is_null()),
        );
    }
    if let Some(from) = f.from {
        base.and_where(Expr::col(("a", "created_at")).gte(from));
    }
    if let Some(until) = f.until {
        base.and_where(Expr::col(("a", "created_at")).lt(until));
    }
    let (rows, total) = paging::fetch(c, base, ("a", "id"), page, |q| {
        q.columns([
            ("a", "id"),
            ("a", "actor_id"),
            ("a", "action"),
            ("a", "entity_type"),
            ("a", "entity_id"),
            ("a", "before"),
            ("a", "after"),
            ("a", "created_at"),
        ])
        .expr_as(Expr::col(("u", "full_name")), "actor_name")
        .order_by(("a", "created_at"), Order::Desc)
        .order_by(("a", "id"), Order::Desc);
    })
    .await?;
    let items = rows
        .iter()
        .map(|r| AuditRow {
            id: r.get("id"),
            actor_id: r.get("actor_id"),
            actor_name: r.get("actor_name"),
            action: r.get("action"),
            entity_type: r.get("entity_type"),
            entity_id: r.get("entity_id"),
            before: r.get("before"),
            after: r.get("after"),
            created_at: r.get("created_at"),
        })
        .collect();
    Ok((items, total))
}
