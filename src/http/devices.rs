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
use domain::{Action, Result};

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

/// Registers a till as `caller`: the role, then the branch it may name,
/// then the domain's rules.
async fn register(state: &AppState, caller: &Caller, body: DeviceCreate) -> Result<Device> {
    caller.require(Action::ManageDevices)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    devices::register_till(&state.pool, &caller.acting(), branch_id, &body.name).await
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

/// Revokes till `raw_id` as `caller`; a revoked till is answered unchanged.
async fn revoke_as(state: &AppState, caller: &Caller, raw_id: &str) -> Result<Device> {
    caller.require(Action::ManageDevices)?;
    let id = path_id(raw_id, "Device")?;
    devices::revoke_till(&state.pool, &caller.acting(), id).await
}
