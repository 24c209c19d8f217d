//! `/purchases`: receiving a stock batch (admin or pharmacist), through the
//! branch's actor: by base units or by pack, typed or scanned.

use actix_web::{web, HttpResponse};

use crate::auth::Caller;
use crate::http::extract::Json;
use crate::state::AppState;
use domain::error::Problem;
use domain::stock::receiving::{self, PurchaseRequest, ReceivePurchase, ReceivedBatch};
use domain::{Action, Result};

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create);
}

/// Receives a batch and records its IN movement in one transaction. With
/// `pack_id`, `quantity` counts packs and `unit_cost` is per pack; with
/// `scan`, the code fills medicine, pack, batch and expiry.
#[utoipa::path(tag = "purchases", security(("bearer" = [])),
    request_body = PurchaseRequest,
    responses((status = 201, body = ReceivedBatch),
        (status = 400, description = "A field is missing or wrong, a field disagrees with `scan` (`validation_failed` naming it), or `scan` cannot be read (`invalid_barcode`)", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`scan` names no medicine or pack (`unknown_gtin`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchases")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<PurchaseRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ReceivePurchases)?;
    let branch_id = caller.branch_scope(Some(body.branch_id))?;
    let draft = receiving::draft(body, branch_id, caller.user_id)?;
    let received = state
        .actors
        .branch(branch_id, ReceivePurchase { draft })
        .await?;
    Ok(HttpResponse::Created().json(received))
}
