//! `/devices`: registering and revoking tills. Admins manage any branch's
//! devices, branch managers their own branch's. The register itself is
//! `GET /compliance/devices`.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json};
use crate::state::AppState;
use domain::error::Problem;
use domain::sync::devices::{self, Device};
use domain::{audit, branches};
use domain::{input, Action, Error, Result};

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create).service(revoke);
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct DeviceCreate {
    /// A label staff recognise (`Till 2`).
    pub name: String,
    /// The branch the till works for (default: the caller's own).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
}

fn not_found() -> Error {
    Error::not_found("Device not found")
}

/// Registers a till. A branch manager naming another branch gets 403; an
/// unknown or deleted branch is 400 naming `branch_id`.
#[utoipa::path(tag = "devices", security(("bearer" = [])),
    request_body = DeviceCreate,
    responses((status = 201, body = Device), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/devices")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<DeviceCreate>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::Created().json(register(&state, &caller, body).await?))
}

/// Registers a till as `caller` (the API and the console both register
/// through here).
pub async fn register(state: &AppState, caller: &Caller, body: DeviceCreate) -> Result<Device> {
    caller.require(Action::ManageDevices)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let name = input::required_text("name", &body.name, 200)?;
    let mut client = state.pool.get().await?;
    if branches::get(&client, branch_id).await?.is_none() {
        return Err(Error::validation(
            "branch_id",
            "There is no such branch (it may have been deleted).",
        ));
    }
    let tx = client.transaction().await?;
    let device = devices::insert(&tx, branch_id, &name, caller.user_id).await?;
    audit(&tx, caller, "device.create", None, &device).await?;
    tx.commit().await?;
    Ok(device)
}

/// Revokes a till: its pushes are refused from then on; it stays in the
/// register. Revoking a revoked device answers 200 with it unchanged (and
/// writes no second audit entry).
#[utoipa::path(tag = "devices", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Device), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[post("/devices/{id}/revoke")]
pub async fn revoke(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(revoke_as(&state, &caller, &id).await?))
}

/// Revokes till `raw_id` as `caller` (the API and the console both revoke
/// through here); a revoked till is answered unchanged.
pub async fn revoke_as(state: &AppState, caller: &Caller, raw_id: &str) -> Result<Device> {
    caller.require(Action::ManageDevices)?;
    let id = path_id(raw_id, "Device")?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    // Locked, so two revocations write one audit entry between them.
    let before = devices::lock(&tx, id).await?.ok_or_else(not_found)?;
    caller.branch_scope(Some(before.branch_id))?;
    if before.is_revoked() {
        return Ok(before);
    }
    let after = devices::revoke(&tx, id).await?.ok_or_else(not_found)?;
    audit(&tx, caller, "device.revoke", Some(&before), &after).await?;
    tx.commit().await?;
    Ok(after)
}

async fn audit(
    tx: &deadpool_postgres::Transaction<'_>,
    caller: &Caller,
    action: &str,
    before: Option<&Device>,
    after: &Device,
) -> Result<()> {
    let json = |d: &Device| serde_json::to_value(d).map_err(Error::internal);
    audit::write_for(
        tx,
        Some(after.branch_id),
        audit::Entry {
            actor_id: Some(caller.user_id),
            action,
            entity_type: "device",
            entity_id: after.id.to_string(),
            before: before.map(json).transpose()?,
            after: Some(json(after)?),
        },
    )
    .await
}
