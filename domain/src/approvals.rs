//! Manager approvals: a request waits `pending` until an admin or a branch
//! manager (never the requester) approves or rejects it, once.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, LockType, Order, Query, SelectStatement};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::db::Pool;
use crate::{audit, db, input, returns, wire, Acting, Error, Registry, Result};

use crate::paging::{self, Page};

pub const STATUSES: [&str; 3] = ["pending", "approved", "rejected"];

/// A list's `status` filter: one of `STATUSES` in any case, blank for all.
pub fn status_filter(raw: Option<&str>) -> Result<Option<String>> {
    input::one_of_or_blank("status", raw, &STATUSES)
}

/// The document's schema of that filter, from the same list.
pub fn status_filter_schema() -> utoipa::openapi::schema::Schema {
    input::one_of_or_blank_schema(&STATUSES)
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Approval {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// What needs approving (free text, e.g. `refund`, `price_override`).
    pub kind: String,
    /// The record the request is about, if any.
    pub reference_id: Option<String>,
    #[schema(value_type = String)]
    pub requested_by: Uuid,
    /// Who decided (approved or rejected); null while pending.
    #[schema(value_type = Option<String>)]
    pub approved_by: Option<Uuid>,
    /// `pending`, `approved` or `rejected`.
    pub status: String,
    pub reason: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub decided_at: Option<DateTime<Utc>>,
}

const COLUMNS: [&str; 10] = [
    "id",
    "branch_id",
    "kind",
    "reference_id",
    "requested_by",
    "approved_by",
    "status",
    "reason",
    "created_at",
    "decided_at",
];

impl Approval {
    fn from_row(r: &Row) -> Self {
        Approval {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            kind: r.get("kind"),
            reference_id: r.get("reference_id"),
            requested_by: r.get("requested_by"),
            approved_by: r.get("approved_by"),
            status: r.get("status"),
            reason: r.get("reason"),
            created_at: r.get("created_at"),
            decided_at: r.get("decided_at"),
        }
    }
}

fn select() -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Table::Approvals)
        .to_owned()
}

/// The approval, row-locked until the transaction ends, so a decision reads
/// the status it is about to change.
pub async fn get_for_update<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Approval>> {
    let q = select()
        .and_where(Expr::col("id").eq(id))
        .lock(LockType::Update)
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Approval::from_row(&r)))
}

/// Newest first; `branch_id` `None` means every branch.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    branch_id: Option<Uuid>,
    status: Option<&str>,
    page: Page,
) -> Result<(Vec<Approval>, i64)> {
    let mut base = Query::select().from(Table::Approvals).to_owned();
    if let Some(b) = branch_id {
        base.and_where(Expr::col("branch_id").eq(b));
    }
    if let Some(s) = status {
        base.and_where(Expr::col("status").eq(s));
    }
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(COLUMNS)
            .order_by("created_at", Order::Desc)
            .order_by("id", Order::Desc);
    })
    .await?;
    let items = rows.iter().map(Approval::from_row).collect();
    Ok((items, total))
}

/// Kinds the service files itself, each with the record its decision acts
/// on (a `refund` approval issues a return's credit note). Nobody may ask
/// for one by hand: it would read as approved while nothing was issued.
pub const RESERVED_KINDS: [&str; 1] = ["refund"];

/// Longest `reference_id` a request may name: any record's id, a UUID or
/// another system's reference.
pub const MAX_REFERENCE_ID: usize = 200;

/// A request for an approval as a client sends it (`POST /approvals`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct ApprovalCreate {
    /// What needs approving, e.g. `price_override` or `stock_adjustment`.
    /// Required. Kinds the service files itself (`refund`) are refused.
    pub kind: Option<String>,
    /// The record the request is about (any id), if any.
    pub reference_id: Option<String>,
    pub reason: Option<String>,
    /// Admins only: the branch the request belongs to (default the caller's).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
}

impl ApprovalCreate {
    /// Checks the request (400 naming the field) for `branch_id`, asked by
    /// `requested_by`.
    pub fn validate(self, branch_id: Uuid, requested_by: Uuid) -> Result<NewApproval> {
        let kind = input::required_text(
            "kind",
            self.kind.as_deref().unwrap_or_default(),
            input::max::LABEL,
        )?;
        if RESERVED_KINDS.iter().any(|r| r.eq_ignore_ascii_case(&kind)) {
            return Err(Error::validation(
                "kind",
                format!(
                    "`{kind}` approvals are filed by the service itself (a cashier's return files \
                     its refund approval); ask for another kind."
                ),
            ));
        }
        let reference_id = input::text(
            "reference_id",
            self.reference_id.as_deref().unwrap_or_default(),
            MAX_REFERENCE_ID,
        )?;
        Ok(NewApproval {
            branch_id,
            kind,
            reference_id: (!reference_id.is_empty()).then_some(reference_id),
            reason: input::text(
                "reason",
                self.reason.as_deref().unwrap_or_default(),
                input::max::NOTES,
            )?,
            requested_by,
        })
    }
}

pub struct NewApproval {
    pub branch_id: Uuid,
    pub kind: String,
    pub reference_id: Option<String>,
    pub reason: String,
    pub requested_by: Uuid,
}

pub async fn insert<C: GenericClient + Sync>(c: &C, a: NewApproval) -> Result<Approval> {
    if crate::branches::get(c, a.branch_id).await?.is_none() {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` names no branch.",
        ));
    }
    let q = Query::insert()
        .into_table(Table::Approvals)
        .columns([
            "id",
            "branch_id",
            "kind",
            "reference_id",
            "reason",
            "requested_by",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            a.branch_id.into(),
            a.kind.into(),
            a.reference_id.into(),
            a.reason.into(),
            a.requested_by.into(),
        ])
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(Approval::from_row(&db::fetch_one(c, &q).await?))
}

/// Decides a pending approval (`status` is `approved` or `rejected`) as one
/// conditional update; `None` when it was no longer pending.
pub async fn decide<C: GenericClient + Sync>(
    c: &C,
    id: Uuid,
    status: &str,
    by: Uuid,
) -> Result<Option<Approval>> {
    let q = Query::update()
        .table(Table::Approvals)
        .value("status", status)
        .value("approved_by", by)
        .value("decided_at", Utc::now())
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("status").eq("pending"))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Approval::from_row(&r)))
}

/// Decides a pending approval inside `tx`: locks the row, answers 404 when
/// `visible` refuses its branch, 403 to the requester and 409 once decided,
/// then updates it conditionally and writes the audit entry
/// (`approval.approve` / `approval.reject`) with the rows before and after.
/// `status` is `approved` or `rejected`. The caller commits.
pub async fn decide_in<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    status: &str,
    by: Uuid,
    visible: impl Fn(Uuid) -> bool,
) -> Result<Approval> {
    let before = get_for_update(tx, id)
        .await?
        .filter(|a| visible(a.branch_id))
        .ok_or_else(|| Error::not_found("Approval not found"))?;
    if before.requested_by == by {
        return Err(Error::forbidden(
            "You cannot decide your own request; another manager must.",
        ));
    }
    let conflict = || {
        Error::conflict(format!(
            "This request is already {}; only a pending request can be decided.",
            before.status
        ))
    };
    let after = decide(tx, id, status, by).await?.ok_or_else(conflict)?;
    audit::write_for(
        tx,
        Some(before.branch_id),
        audit::Entry {
            actor_id: Some(by),
            action: if status == "approved" {
                "approval.approve"
            } else {
                "approval.reject"
            },
            entity_type: "approval",
            entity_id: id.to_string(),
            before: Some(serde_json::to_value(&before).map_err(Error::internal)?),
            after: Some(serde_json::to_value(&after).map_err(Error::internal)?),
        },
    )
    .await?;
    Ok(after)
}

/// Decides one approval for `acting` (who may `DecideApprovals`): 403 for
/// the requester, 404 for another branch's, 409 once decided. The row is
/// locked and the update is conditional, so two deciders cannot both win.
/// The approval of a cashier's return (kind `refund`) is decided on its
/// branch's actor, in one transaction with the credit note it issues (or
/// the return it ends). `status` is `approved` or `rejected`.
pub async fn decide_one(
    pool: &Pool,
    registry: &Registry,
    acting: &Acting,
    id: Uuid,
    status: &str,
) -> Result<Approval> {
    let mut client = pool.get().await?;
    if let Some(branch_id) = returns::refund_approval_branch(&client, id).await? {
        drop(client);
        let cmd = returns::DecideRefund {
            approval_id: id,
            approve: status == "approved",
            decider: acting.user_id,
            decider_branch: acting.branch_id,
            any_branch: acting.any_branch(),
        };
        return registry.branch(branch_id, cmd).await;
    }
    let tx = client.transaction().await?;
    let after = decide_in(&tx, id, status, acting.user_id, |b| {
        acting.can_see_branch(b)
    })
    .await?;
    crate::db::commit(tx).await?;
    Ok(after)
}
