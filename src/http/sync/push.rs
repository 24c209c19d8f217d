//! `POST /sync/push`: a till's queued changes, handed to its device's actor.

use actix_web::{web, HttpResponse};
use uuid::Uuid;

use crate::auth::{Caller, Signed};
use crate::http::extract::{Json as Body, PushBodyLimit};
use crate::state::AppState;
use domain::error::Problem;
use domain::sync::devices;
use domain::sync::push::{Change, PushAnswer, PushBatch, PushRequest, Pusher, MAX_CHANGES};
use domain::{Action, Error, Result};

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

/// The push route sits in its own scope, which carries its larger body
/// limit.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(
        utoipa_actix_web::scope("/sync/push")
            .app_data(PushBodyLimit)
            .service(push),
    );
}

/// Applies a till's changes in order, each in its own transaction; batches
/// of one device one at a time, devices in parallel.
#[utoipa::path(tag = "sync", security(("bearer" = [])),
    request_body = PushRequest,
    responses((status = 200, body = PushAnswer), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 413, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("")]
pub async fn push(
    state: web::Data<AppState>,
    signed: Signed,
    Body(body): Body<PushRequest>,
) -> Result<HttpResponse> {
    // The token is checked with the device's read (no round trip of its
    // own); a refusal before it checks the token first.
    let decided = (|| {
        signed.claimed().require(Action::Push)?;
        let PushRequest { device_id, changes } = body;
        if changes.len() > MAX_CHANGES {
            return Err(Error::PayloadTooLarge(format!(
                "A push may carry at most {MAX_CHANGES} changes; this one has {}.",
                changes.len()
            )));
        }
        let changes = changes
            .iter()
            .enumerate()
            .map(|(i, raw)| Change::parse(raw, i))
            .collect::<Result<Vec<_>>>()?;
        let device_id: Uuid = device_id
            .parse()
            .map_err(|_| Error::not_found("Device not found"))?;
        Ok((device_id, changes))
    })();
    let (device_id, changes) = signed.refuse_after_check(&state.pool, decided).await?;
    let client = state.pool.get().await?;
    let (caller, device) = signed
        .check_with(&client, devices::get(&client, device_id))
        .await?;
    drop(client);
    let device = admit(&caller, device)?;
    let span = tracing::info_span!("push", device_id = %device.id, changes = changes.len());
    let batch = PushBatch {
        pusher: Pusher {
            device_id: device.id,
            branch_id: device.branch_id,
            user_id: caller.user_id,
            role: caller.role,
            org_id: caller.org_id,
        },
        changes,
        actors: state.actors.clone(),
        desk: state.pushes.clone(),
        span,
    };
    let outcome = state.actors.device(device.id, batch).await?;
    Ok(HttpResponse::Ok().json(outcome))
}

/// The device, if the caller may push for it: 404 unknown; 403 another
/// branch's device (admins excepted) or revoked.
fn admit(caller: &Caller, device: Option<devices::Device>) -> Result<devices::Device> {
    let device = device.ok_or_else(|| Error::not_found("Device not found"))?;
    if device.branch_id != caller.branch_id && !caller.any_branch() {
        return Err(Error::forbidden("This device belongs to another branch."));
    }
    if device.is_revoked() {
        return Err(Error::forbidden("This device is revoked."));
    }
    Ok(device)
}
