//! A batch's regulator status: `quarantined` and `recalled` batches are
//! never sold or transferred. A change is audited with the status before
//! and after, and reaches the tills through the change log.

use crate::tables::Table;
use chrono::Utc;
use sea_query::{Expr, ExprTrait, LockType, Query};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{emit, Batch, COLUMNS};
use crate::db::{self, Pool};
use crate::sync::changes::{self, Op};
use crate::{audit, Acting, Error, Result};

pub const REGULATOR_STATUSES: [&str; 3] = ["quarantined", "active", "recalled"];

#[derive(Debug, Deserialize, ToSchema)]
pub struct QuarantineRequest {
    /// `quarantined`, `active` or `recalled`.
    pub status: String,
}

impl QuarantineRequest {
    /// The status asked for: exactly one of the spec's values, with no case
    /// folding and no trimming.
    pub fn validate(self) -> Result<String> {
        let status = self.status;
        if !REGULATOR_STATUSES.contains(&status.as_str()) {
            return Err(Error::validation(
                "status",
                "`status` must be `quarantined`, `active` or `recalled`.",
            ));
        }
        Ok(status)
    }
}

/// Sets batch `id`'s regulator status for `acting`, in one transaction: the
/// batch locked, updated, its change logged and the change audited. Other
/// branches' batches read as missing to a non-admin.
pub async fn set_status(pool: &Pool, acting: &Acting, id: Uuid, status: String) -> Result<Batch> {
    let not_found = || Error::not_found("Batch not found");
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let own = acting.own_branch();
    let current = Query::select()
        .column("regulator_status")
        .from(Table::Batches)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(own, |q, b| {
            q.and_where(Expr::col("branch_id").eq(b));
        })
        .lock(LockType::Update)
        .to_owned();
    let before: String = db::fetch_opt(&tx, &current)
        .await?
        .ok_or_else(not_found)?
        .get(0);
    let rev = changes::allocate(&tx).await?;
    let update = Query::update()
        .table(Table::Batches)
        .value("regulator_status", status.clone())
        .value("rev", rev)
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(id))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let batch = db::fetch_opt(&tx, &update)
        .await?
        .map(|r| Batch::from_row(&r))
        .ok_or_else(not_found)?;
    emit(&tx, rev, &batch, Op::Update).await?;
    audit::write_for(
        &tx,
        Some(batch.branch_id),
        audit::Entry {
            actor_id: Some(acting.user_id),
            action: "batch.regulator_status",
            entity_type: "batch",
            entity_id: id.to_string(),
            before: Some(serde_json::json!({ "regulator_status": before })),
            after: Some(serde_json::json!({ "regulator_status": status })),
        },
    )
    .await?;
    crate::db::commit(tx).await?;
    Ok(batch)
}
