//! `/sessions`: cash sessions. Opening goes through the branch actor; the
//! database's partial unique index keeps one open session per branch even
//! with several server processes. Opening and closing need a selling role
//! (admin, branch manager, pharmacist, cashier); anyone signed in may read
//! the branch's open session.

use actix_web::{web, HttpResponse};
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, Query};
use crate::state::AppState;
use domain::cash_sessions::{self, CashSession, CloseSession, OpenSession};
use domain::error::Problem;
use domain::{Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(open).service(current).service(close);
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct OpenRequest {
    /// Cash in the drawer at opening (default 0).
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub opening_float: Option<Decimal>,
    /// Admins only: open on another branch.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchQuery {
    /// Admins only: another branch.
    pub branch_id: Option<Uuid>,
}

/// Opens the branch's cash session, or returns the one already open.
#[utoipa::path(tag = "sessions", security(("bearer" = [])),
    request_body(content = Option<OpenRequest>, description = "May be omitted"),
    responses((status = 200, body = CashSession), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/sessions/open")]
pub async fn open(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<OpenRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::OpenCloseCashSession)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let opening_float =
        domain::input::amount("opening_float", body.opening_float.unwrap_or_default())?;
    if body.branch_id.is_some() {
        let client = state.pool.get().await?;
        domain::branches::named(&client, branch_id).await?;
    }
    let session = state
        .actors
        .branch(
            branch_id,
            OpenSession {
                branch_id,
                user_id: caller.user_id,
                opening_float,
            },
        )
        .await?;
    Ok(HttpResponse::Ok().json(session))
}

/// The branch's open cash session.
#[utoipa::path(tag = "sessions", security(("bearer" = [])), params(BranchQuery),
    responses((status = 200, body = CashSession), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/sessions/current")]
pub async fn current(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<BranchQuery>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(q.branch_id)?;
    let client = state.pool.get().await?;
    let session = cash_sessions::current(&client, branch_id)
        .await?
        .ok_or_else(|| Error::not_found("No cash session is open on this branch"))?;
    Ok(HttpResponse::Ok().json(session))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CloseRequest {
    /// Cash counted in the drawer at closing.
    #[schema(value_type = f64, minimum = 0)]
    pub counted_cash: Decimal,
}

/// Closes a session: totals are final, `expected_cash` = opening float +
/// cash takings − cash refunds, `variance` = counted − expected. 409 when
/// already closed.
#[utoipa::path(tag = "sessions", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = CloseRequest,
    responses((status = 200, body = CashSession), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/sessions/{id}/close")]
pub async fn close(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<CloseRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::OpenCloseCashSession)?;
    let id = path_id(&id, "Cash session")?;
    let counted_cash = domain::input::amount("counted_cash", body.counted_cash)?;
    let session = {
        let client = state.pool.get().await?;
        cash_sessions::get(&client, id)
            .await?
            .filter(|s| caller.can_see_branch(s.branch_id))
            .ok_or_else(|| Error::not_found("Cash session not found"))?
    };
    let closed = state
        .actors
        .branch(
            session.branch_id,
            CloseSession {
                session_id: id,
                user_id: caller.user_id,
                counted_cash,
            },
        )
        .await?;
    Ok(HttpResponse::Ok().json(closed))
}
