//! Per-branch tuning of the actor runtime and the view of the live actors
//! (`/ops/actors` and the console's operations page both go through here).
//!
//! A branch's mailbox capacity and group-commit size come, field by field,
//! from its stored override, else the static override of its code in the
//! configuration, else the runtime's defaults. A change is audited, applied
//! at once by the process that took it and by every other process at its
//! next reload.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::actor_overrides::{self, Stored};
use crate::db::Pool;
use crate::sales::desk::SaleDesk;
use crate::{audit, Acting, BranchOverride, Error, Kind, Registry, Result};

/// The mailbox capacities a branch may be given.
pub const MAILBOX_RANGE: std::ops::RangeInclusive<usize> = 1..=100_000;
/// The group-commit sizes a branch may be given.
pub const SALE_BATCH_RANGE: std::ops::RangeInclusive<usize> = 1..=1024;

/// What the tuning reads and changes in this process: the actor registry,
/// the sale desk, and the configured defaults and static overrides.
pub struct Runtime<'a> {
    pub pool: &'a Pool,
    pub registry: &'a Registry,
    pub sales: &'a SaleDesk,
    /// The static overrides, keyed by upper-case branch code.
    pub configured: BTreeMap<String, BranchOverride>,
    pub branch_mailbox: usize,
    pub device_mailbox: usize,
    pub overrides_reload_ms: u64,
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

/// The live actors of the caller's organisation (the caller may
/// `OperateActors`).
pub async fn actors_of(rt: &Runtime<'_>, acting: &Acting) -> Result<ActorList> {
    let live = rt.registry.snapshot();
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
    let client = rt.pool.get().await?;
    // Only actors of the caller's organisation are shown.
    let codes = actor_overrides::codes_of(&client, acting.org_id, branch_ids).await?;
    let devices = actor_overrides::devices_of(&client, acting.org_id, device_ids).await?;
    let mut items: Vec<ActorRow> = live
        .into_iter()
        .filter_map(|a| {
            let (branch_id, branch_code, device_id, batch) = match a.kind {
                Kind::Branch => {
                    let code = codes.get(&a.key)?.clone();
                    let batch = rt.sales.batch_max(rt.registry, a.key);
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
    let total = items.len() as i64;
    Ok(ActorList {
        items,
        total,
        defaults: ActorDefaults {
            branch_mailbox: rt.branch_mailbox.max(1),
            device_mailbox: rt.device_mailbox.max(1),
            sale_batch_max: rt.sales.default_batch_max(),
            overrides_reload_ms: rt.overrides_reload_ms,
        },
    })
}

/// The branch's tuning from its stored override, the configuration and the
/// defaults.
fn tuning(rt: &Runtime<'_>, branch_id: Uuid, code: String, stored: Option<Stored>) -> BranchTuning {
    let configured = rt.configured.get(&code).copied();
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
        rt.registry.default_capacity(Kind::Branch),
    );
    let (sale_batch_max, sale_batch_max_source) = pick(
        from_db.batch_max,
        from_config.batch_max,
        rt.sales.default_batch_max(),
    );
    BranchTuning {
        branch_id,
        branch_code: code,
        mailbox,
        mailbox_source,
        sale_batch_max,
        sale_batch_max_source,
        stored,
        live_capacity: rt
            .registry
            .stats(Kind::Branch, branch_id)
            .map(|s| s.capacity),
    }
}

/// Applies the branch's combined override in this process at once (the
/// others follow at their next reload).
fn apply(rt: &Runtime<'_>, branch_id: Uuid, code: &str, stored: Option<&Stored>) {
    let configured = rt.configured.get(code).copied();
    let merged = actor_overrides::merge(stored.map(Stored::as_override), configured);
    let merged = (merged != BranchOverride::default()).then_some(merged);
    rt.registry.set_branch_override(branch_id, merged);
}

/// Branch `id`'s tuning (the caller may `OperateActors`).
pub async fn tuning_of(rt: &Runtime<'_>, acting: &Acting, id: Uuid) -> Result<BranchTuning> {
    let client = rt.pool.get().await?;
    let code = actor_overrides::branch_code(&client, acting.org_id, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    let stored = actor_overrides::get(&client, id).await?;
    Ok(tuning(rt, id, code, stored))
}

/// Sets branch `id`'s tuning (the caller may `OperateActors`), audited,
/// applied in this process at once.
pub async fn set_tuning(
    rt: &Runtime<'_>,
    acting: &Acting,
    id: Uuid,
    body: BranchTuningWrite,
) -> Result<BranchTuning> {
    let mailbox = in_range("mailbox", body.mailbox, &MAILBOX_RANGE)?;
    let sale_batch_max = in_range("sale_batch_max", body.sale_batch_max, &SALE_BATCH_RANGE)?;
    if mailbox.is_none() && sale_batch_max.is_none() {
        return Err(Error::bad_request(
            "No fields to update: send `mailbox`, `sale_batch_max` or both (DELETE removes the override).",
        ));
    }
    let mut client = rt.pool.get().await?;
    let tx = client.transaction().await?;
    let code = actor_overrides::lock_branch(&tx, acting.org_id, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    let before = actor_overrides::get(&tx, id).await?;
    let after = actor_overrides::put(&tx, id, mailbox, sale_batch_max, acting.user_id).await?;
    audit::write(
        &tx,
        audit::Entry {
            actor_id: Some(acting.user_id),
            action: "actor_tuning.set",
            entity_type: "branch",
            entity_id: id.to_string(),
            before: before.as_ref().map(as_json).transpose()?,
            after: Some(as_json(&after)?),
        },
    )
    .await?;
    crate::db::commit(tx).await?;
    apply(rt, id, &code, Some(&after));
    Ok(tuning(rt, id, code, Some(after)))
}

/// Removes branch `id`'s stored tuning (the caller may `OperateActors`),
/// audited when there was one.
pub async fn clear_tuning(rt: &Runtime<'_>, acting: &Acting, id: Uuid) -> Result<()> {
    let mut client = rt.pool.get().await?;
    let tx = client.transaction().await?;
    let code = actor_overrides::lock_branch(&tx, acting.org_id, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    if let Some(before) = actor_overrides::remove(&tx, id).await? {
        audit::write(
            &tx,
            audit::Entry {
                actor_id: Some(acting.user_id),
                action: "actor_tuning.remove",
                entity_type: "branch",
                entity_id: id.to_string(),
                before: Some(as_json(&before)?),
                after: None,
            },
        )
        .await?;
    }
    crate::db::commit(tx).await?;
    apply(rt, id, &code, None);
    Ok(())
}

fn as_json(s: &Stored) -> Result<serde_json::Value> {
    serde_json::to_value(s).map_err(Error::internal)
}
