//! `/stockcount/submit`: a shelf count applied as stock adjustments on the
//! caller's branch, through the branch actor.

use actix_web::{web, HttpResponse};

use crate::auth::Caller;
use crate::http::extract::Json;
use crate::state::AppState;
use domain::error::Problem;
use domain::stock::count::{CountRequest, CountResult, SubmitCount};
use domain::{Action, Result};

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(submit);
}

/// Applies a stock count: a surplus lands on the newest batch, a shortfall
/// drains the oldest batches first.
#[utoipa::path(tag = "stock", security(("bearer" = [])),
    request_body = CountRequest,
    responses((status = 200, body = CountResult), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/stockcount/submit")]
pub async fn submit(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<CountRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::SubmitStockCount)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let named_branch = body.branch_id.is_some();
    let lines = body.lines()?;
    if named_branch {
        let client = state.pool.get().await?;
        domain::branches::named(&client, branch_id).await?;
    }
    let result = state
        .actors
        .branch(
            branch_id,
            SubmitCount {
                branch_id,
                user_id: caller.user_id,
                lines,
            },
        )
        .await?;
    Ok(HttpResponse::Ok().json(result))
}
