//! `/currencies` (the ISO 4217 registry), `/currency/rates` (admins file
//! exchange rates against the base currency) and `/currency/branch` (the
//! caller's branch currency with the rate in force and its age).

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::http::extract::{Json, Query};
use crate::state::AppState;
use domain::currency::{self, BranchCurrency, Currency, Rate, RateWrite};
use domain::error::Problem;
use domain::{Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(file_rate).service(branch);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CurrencyQuery {
    /// `true`: active currencies only; `false`: inactive only; absent: all.
    pub active: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CurrencyList {
    pub items: Vec<Currency>,
    pub total: i64,
}

/// The currency registry by code.
#[utoipa::path(tag = "currency", security(("bearer" = [])),
    params(CurrencyQuery),
    responses((status = 200, body = CurrencyList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/currencies")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller,
    Query(q): Query<CurrencyQuery>,
) -> Result<HttpResponse> {
    let client = state.pool.get().await?;
    let items = currency::list(&client, q.active).await?;
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(CurrencyList { items, total }))
}

/// Files an exchange rate of a currency against the current base currency.
#[utoipa::path(tag = "currency", security(("bearer" = [])),
    request_body = RateWrite,
    responses((status = 201, body = Rate), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/currency/rates")]
pub async fn file_rate(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<RateWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageCurrencyRates)?;
    let client = state.pool.get().await?;
    let filed = currency::file_rate(&client, caller.org_id, caller.user_id, body).await?;
    Ok(HttpResponse::Created().json(filed))
}

/// `branch_id` is named only to refuse it: the branch is the session's.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchCurrencyQuery {
    /// Not accepted (400): the branch comes from the session. Left out of
    /// the document: no value is valid.
    #[param(ignore)]
    pub branch_id: Option<String>,
}

/// The branch currency of the session's branch. 400 when no rate is filed
/// for it; a branch in the base currency reads rate 1, never stale.
#[utoipa::path(tag = "currency", security(("bearer" = [])),
    params(BranchCurrencyQuery),
    responses((status = 200, body = BranchCurrency), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/currency/branch")]
pub async fn branch(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<BranchCurrencyQuery>,
) -> Result<HttpResponse> {
    if q.branch_id.is_some() {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` is not accepted here: the branch is the one you are signed in to.",
        ));
    }
    let client = state.pool.get().await?;
    let view = currency::branch_view(&client, caller.branch_id, caller.org_id).await?;
    Ok(HttpResponse::Ok().json(view))
}
