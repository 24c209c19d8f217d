//! `/transfers`: stock moving between branches. Creating and cancelling run
//! on the source branch's actor, receiving on the destination's.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::stock::transfers::{self, CancelTransfer, ReceiveTransfer, Transfer, TransferCreate};
use domain::window::DateWindow;
use domain::{Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(get)
        .service(receive)
        .service(cancel);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TransferQuery {
    /// Transfers from or to this branch (non-admins: their own only).
    pub branch_id: Option<Uuid>,
    /// First day, `YYYY-MM-DD` (inclusive, organisation calendar).
    #[param(schema_with = domain::window::day_or_blank)]
    pub from_date: Option<String>,
    /// Last day, `YYYY-MM-DD` (inclusive, organisation calendar).
    #[param(schema_with = domain::window::day_or_blank)]
    pub to_date: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransferList {
    /// Newest first, at most 100.
    pub items: Vec<Transfer>,
    /// Rows returned.
    pub total: i64,
}

/// Whether the caller works at either end of the transfer.
fn involved(caller: &Caller, t: &Transfer) -> bool {
    caller.can_see_branch(t.from_branch_id) || caller.can_see_branch(t.to_branch_id)
}

/// A transfer the caller may see; 404 otherwise.
async fn visible(state: &AppState, caller: &Caller, raw_id: &str) -> Result<Transfer> {
    let id = path_id(raw_id, "Transfer")?;
    let client = state.pool.get().await?;
    transfers::get(&client, id)
        .await?
        .filter(|t| involved(caller, t))
        .ok_or_else(|| Error::not_found("Transfer not found"))
}

/// Sends stock to another branch: it leaves the source now
/// (first-expiry-first-out) and is `in_transit` until received.
#[utoipa::path(tag = "transfers", security(("bearer" = [])),
    request_body = TransferCreate,
    responses((status = 201, body = Transfer), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/transfers")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<TransferCreate>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageTransfers)?;
    if !caller.can_see_branch(body.from_branch_id) {
        return Err(Error::forbidden(
            "You can only send stock from your own branch.",
        ));
    }
    let cmd = body.validate(caller.user_id)?;
    let transfer = state.actors.branch(cmd.from_branch_id, cmd).await?;
    Ok(HttpResponse::Created().json(transfer))
}

/// Takes a transfer in at the destination: its stock becomes batches there.
#[utoipa::path(tag = "transfers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Transfer), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/transfers/{id}/receive")]
pub async fn receive(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageTransfers)?;
    let t = visible(&state, &caller, &id).await?;
    if !caller.can_see_branch(t.to_branch_id) {
        return Err(Error::forbidden(
            "Only the destination branch can receive a transfer.",
        ));
    }
    let cmd = ReceiveTransfer {
        transfer_id: t.id,
        to_branch_id: t.to_branch_id,
        user_id: caller.user_id,
    };
    let transfer = state.actors.branch(t.to_branch_id, cmd).await?;
    Ok(HttpResponse::Ok().json(transfer))
}

/// Calls back a transfer in transit: its stock returns to the source batches.
#[utoipa::path(tag = "transfers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Transfer), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/transfers/{id}/cancel")]
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageTransfers)?;
    let t = visible(&state, &caller, &id).await?;
    let cmd = CancelTransfer {
        transfer_id: t.id,
        user_id: caller.user_id,
    };
    let transfer = state.actors.branch(t.from_branch_id, cmd).await?;
    Ok(HttpResponse::Ok().json(transfer))
}

/// One transfer.
#[utoipa::path(tag = "transfers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Transfer), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/transfers/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadTransfers)?;
    let t = visible(&state, &caller, &id).await?;
    Ok(HttpResponse::Ok().json(t))
}

/// Transfers from or to a branch, newest first, at most 100.
#[utoipa::path(tag = "transfers", security(("bearer" = [])), params(TransferQuery),
    responses((status = 200, body = TransferList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/transfers")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<TransferQuery>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadTransfers)?;
    let window = DateWindow::parse(q.from_date.as_deref(), q.to_date.as_deref())?;
    let filter = transfers::ListFilter {
        branch_id: caller.branch_filter(q.branch_id)?,
        from_date: window.from,
        to_date: window.to,
    };
    let client = state.pool.get().await?;
    let items = transfers::list(&client, &filter).await?;
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(TransferList { items, total }))
}
