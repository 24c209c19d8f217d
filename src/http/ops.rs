//! `/ops/actors`: the live actors of this server process, and per-branch
//! mailbox tuning without a restart (admin).
//!
//! A branch's mailbox capacity and group-commit size come, field by field,
//! from its stored override (set here), else the static override of its
//! code in `config/*.toml` (`[actors.branches.<CODE>]`), else the
//! `[actors]` defaults. A change is audited, applied at once by the process
//! that took it and by every other process at its next reload
//! (`actors.overrides_reload_ms`, 2 s by default).

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::config::{MAILBOX_RANGE, SALE_BATCH_RANGE};
use crate::http::extract::{path_id, Json};
use crate::state::AppState;
use domain::actor_overrides::{self, Stored};
use domain::audit;
use domain::error::Problem;
use domain::{Action, BranchOverride, Error, Kind, Result};

use actix_web::{delete, get, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(get_branch)
        .service(put_branch)
        .service(delete_branch);
}

/// One live actor of the answering process.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActorRow {
    /// `branch` or `device`.
    #[schema(example = "branch")]
    pub kind: &'static str,
    /// The branch the actor serves, or the device's branch.
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    #[schema(example = "MAIN")]
    pub branch_code: Option<String>,
    /// Device actors only.
    #[schema(value_type = Option<String>)]
    pub device_id: Option<Uuid>,
    /// Requests the actor admits before answering 503.
    #[schema(example = 256)]
    pub capacity: usize,
    /// Requests waiting for it now (in its mailbox, or REST sales queued
    /// for the branch's group commit).
    #[schema(example = 3)]
    pub depth: i64,
    /// Branch actors: the most REST sales one commit makes.
    #[schema(example = 32)]
    pub sale_batch_max: Option<usize>,
    /// Requests refused (503) in the last minute.
    pub refusals_last_minute: u64,
    /// 99th percentile of the waits for the actor in the last minute, in
    /// ms; `null` when nothing waited.
    #[schema(example = 1.25)]
    pub p99_wait_ms: Option<f64>,
    /// How many waits the percentile was taken from (at most 512).
    pub wait_samples: usize,
}

/// The defaults in force where no override applies.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActorDefaults {
    pub branch_mailbox: usize,
    pub device_mailbox: usize,
    pub sale_batch_max: usize,
    pub overrides_reload_ms: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ActorList {
    pub items: Vec<ActorRow>,
    pub total: i64,
    pub defaults: ActorDefaults,
}

/// A branch's tuning: the values in force and where each comes from.
#[derive(Debug, Serialize, ToSchema)]
pub struct BranchTuning {
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(example = "MAIN")]
    pub branch_code: String,
    /// The mailbox capacity the branch gets.
    #[schema(example = 512)]
    pub mailbox: usize,
    /// `database`, `config` or `default`.
    #[schema(example = "database")]
    pub mailbox_source: &'static str,
    #[schema(example = 64)]
    pub sale_batch_max: usize,
    /// `database`, `config` or `default`.
    #[schema(example = "config")]
    pub sale_batch_max_source: &'static str,
    /// The stored override, if any.
    pub stored: Option<Stored>,
    /// The capacity the branch's actor has in the answering process now;
    /// `null` when it has not started there.
    pub live_capacity: Option<usize>,
}

/// `null` or absent keeps the configured value for that field. PUT
/// replaces the whole override: a field left out is cleared.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BranchTuningWrite {
    /// Mailbox capacity, 1..100000.
    #[schema(minimum = 1, maximum = 100000, example = 512)]
    pub mailbox: Option<i64>,
    /// Group-commit size (REST sales per transaction), 1..1024.
    #[schema(minimum = 1, maximum = 1024, example = 64)]
    pub sale_batch_max: Option<i64>,
}

fn in_range(
    field: &str,
    n: Option<i64>,
    range: &std::ops::RangeInclusive<usize>,
) -> Result<Option<i32>> {
    let Some(n) = n else { return Ok(None) };
    let ok = usize::try_from(n).is_ok_and(|u| range.contains(&u));
    if !ok {
        return Err(Error::validation(
            field,
            format!(
                "`{field}` must be a whole number from {} to {}.",
                range.start(),
                range.end()
            ),
        ));
    }
    i32::try_from(n)
        .map(Some)
        .map_err(|_| Error::validation(field, "out of range"))
}

fn wait_ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// The live actors of the answering process, branches first (by code).
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    responses((status = 200, body = ActorList), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/ops/actors")]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(actors_of(&state, &caller).await?))
}

/// The live actors as `caller` may see them (the API and the console both
/// read them through here).
pub async fn actors_of(state: &AppState, caller: &Caller) -> Result<ActorList> {
    caller.require(Action::OperateActors)?;
    let live = state.actors.snapshot();
    let branch_ids: Vec<Uuid> = live
        .iter()
        .filter(|a| a.kind == Kind::Branch)
        .map(|a| a.key)
        .collect();
    let device_ids: Vec<Uuid> = live
        .iter()
        .filter(|a| a.kind == Kind::Device)
        .map(|a| a.key)
        .collect();
    let client = state.pool.get().await?;
    // Only actors of the caller's organisation are shown.
    let codes = actor_overrides::codes_of(&client, caller.org_id, branch_ids).await?;
    let devices = actor_overrides::devices_of(&client, caller.org_id, device_ids).await?;
    let mut items: Vec<ActorRow> = live
        .into_iter()
        .filter_map(|a| {
            let (branch_id, branch_code, device_id, batch) = match a.kind {
                Kind::Branch => {
                    let code = codes.get(&a.key)?.clone();
                    let batch = state.sales.batch_max(&state.actors, a.key);
                    (a.key, code, None, Some(batch))
                }
                Kind::Device => {
                    let (branch, code) = devices.get(&a.key)?.clone();
                    (branch, code, Some(a.key), None)
                }
            };
            Some(ActorRow {
                kind: a.kind.as_str(),
                branch_id: Some(branch_id),
                branch_code: Some(branch_code),
                device_id,
                capacity: a.capacity,
                depth: a.depth,
                sale_batch_max: batch,
                refusals_last_minute: a.refusals_last_minute,
                p99_wait_ms: a.p99_wait.map(wait_ms),
                wait_samples: a.wait_samples,
            })
        })
        .collect();
    items.sort_by(|a, b| {
        (a.kind != "branch", &a.branch_code, a.device_id).cmp(&(
            b.kind != "branch",
            &b.branch_code,
            b.device_id,
        ))
    });
    let a = &state.config.actors;
    let total = items.len() as i64;
    Ok(ActorList {
        items,
        total,
        defaults: ActorDefaults {
            branch_mailbox: a.branch_mailbox.max(1),
            device_mailbox: a.device_mailbox.max(1),
            sale_batch_max: state.sales.default_batch_max(),
            overrides_reload_ms: a.overrides_reload_ms,
        },
    })
}

/// The branch's tuning from its stored override, the configuration and the
/// defaults.
fn tuning(state: &AppState, branch_id: Uuid, code: String, stored: Option<Stored>) -> BranchTuning {
    let configured = state.config.branch_overrides().get(&code).copied();
    let from_db = stored.as_ref().map(Stored::as_override).unwrap_or_default();
    let from_config = configured.unwrap_or_default();
    let pick = |db: Option<usize>, cfg: Option<usize>, default: usize| match (db, cfg) {
        (Some(n), _) => (n, "database"),
        (None, Some(n)) => (n, "config"),
        (None, None) => (default, "default"),
    };
    let (mailbox, mailbox_source) = pick(
        from_db.mailbox,
        from_config.mailbox,
        state.actors.default_capacity(Kind::Branch),
    );
    let (sale_batch_max, sale_batch_max_source) = pick(
        from_db.batch_max,
        from_config.batch_max,
        state.sales.default_batch_max(),
    );
    BranchTuning {
        branch_id,
        branch_code: code,
        mailbox,
        mailbox_source,
        sale_batch_max,
        sale_batch_max_source,
        stored,
        live_capacity: state
            .actors
            .stats(Kind::Branch, branch_id)
            .map(|s| s.capacity),
    }
}

/// Applies the branch's combined override in this process at once (the
/// others follow at their next reload).
fn apply(state: &AppState, branch_id: Uuid, code: &str, stored: Option<&Stored>) {
    let configured = state.config.branch_overrides().get(code).copied();
    let merged = actor_overrides::merge(stored.map(Stored::as_override), configured);
    let merged = (merged != BranchOverride::default()).then_some(merged);
    state.actors.set_branch_override(branch_id, merged);
}

/// A branch's tuning.
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    params(("branchId" = String, Path)),
    responses((status = 200, body = BranchTuning), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/ops/actors/branches/{branchId}")]
pub async fn get_branch(
    state: web::Data<AppState>,
    caller: Caller,
    branch_id: web::Path<String>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(tuning_of(&state, &caller, &branch_id).await?))
}

/// Branch `raw_id`'s tuning (the API and the console both read it here).
pub async fn tuning_of(state: &AppState, caller: &Caller, raw_id: &str) -> Result<BranchTuning> {
    caller.require(Action::OperateActors)?;
    let id = path_id(raw_id, "Branch")?;
    let client = state.pool.get().await?;
    let code = actor_overrides::branch_code(&client, caller.org_id, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    let stored = actor_overrides::get(&client, id).await?;
    Ok(tuning(state, id, code, stored))
}

/// Sets the branch's mailbox capacity and group-commit size (admin),
/// audited, and applied by every server process within a few seconds.
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    params(("branchId" = String, Path)), request_body = BranchTuningWrite,
    responses((status = 200, body = BranchTuning), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[put("/ops/actors/branches/{branchId}")]
pub async fn put_branch(
    state: web::Data<AppState>,
    caller: Caller,
    branch_id: web::Path<String>,
    Json(body): Json<BranchTuningWrite>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(set_tuning(&state, &caller, &branch_id, body).await?))
}

/// Sets branch `raw_id`'s tuning as `caller` (the API and the console both
/// set it here).
pub async fn set_tuning(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    body: BranchTuningWrite,
) -> Result<BranchTuning> {
    caller.require(Action::OperateActors)?;
    let id = path_id(raw_id, "Branch")?;
    let mailbox = in_range("mailbox", body.mailbox, &MAILBOX_RANGE)?;
    let sale_batch_max = in_range("sale_batch_max", body.sale_batch_max, &SALE_BATCH_RANGE)?;
    if mailbox.is_none() && sale_batch_max.is_none() {
        return Err(Error::bad_request(
            "No fields to update: send `mailbox`, `sale_batch_max` or both (DELETE removes the override).",
        ));
    }
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let code = actor_overrides::lock_branch(&tx, caller.org_id, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    let before = actor_overrides::get(&tx, id).await?;
    let after = actor_overrides::put(&tx, id, mailbox, sale_batch_max, caller.user_id).await?;
    audit::write(
        &tx,
        audit::Entry {
            actor_id: Some(caller.user_id),
            action: "actor_tuning.set",
            entity_type: "branch",
            entity_id: id.to_string(),
            before: before.as_ref().map(as_json).transpose()?,
            after: Some(as_json(&after)?),
        },
    )
    .await?;
    tx.commit().await?;
    apply(state, id, &code, Some(&after));
    Ok(tuning(state, id, code, Some(after)))
}

/// Removes the branch's stored override (admin): it goes back to the
/// configured values. 204 also when it had none.
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    params(("branchId" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/ops/actors/branches/{branchId}")]
pub async fn delete_branch(
    state: web::Data<AppState>,
    caller: Caller,
    branch_id: web::Path<String>,
) -> Result<HttpResponse> {
    clear_tuning(&state, &caller, &branch_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Removes branch `raw_id`'s stored tuning as `caller` (the API and the
/// console both remove it here).
pub async fn clear_tuning(state: &AppState, caller: &Caller, raw_id: &str) -> Result<()> {
    caller.require(Action::OperateActors)?;
    let id = path_id(raw_id, "Branch")?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let code = actor_overrides::lock_branch(&tx, caller.org_id, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    if let Some(before) = actor_overrides::remove(&tx, id).await? {
        audit::write(
            &tx,
            audit::Entry {
                actor_id: Some(caller.user_id),
                action: "actor_tuning.remove",
                entity_type: "branch",
                entity_id: id.to_string(),
                before: Some(as_json(&before)?),
                after: None,
            },
        )
        .await?;
    }
    tx.commit().await?;
    apply(state, id, &code, None);
    Ok(())
}

fn as_json(s: &Stored) -> Result<serde_json::Value> {
    serde_json::to_value(s).map_err(Error::internal)
}
