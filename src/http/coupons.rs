//! `/coupons`: admins and branch managers create; anyone signed in lists.
//! Coupons are organisation-wide; codes are unique and stored uppercased.

use actix_web::{web, HttpResponse};

use crate::auth::Caller;
use crate::http::extract::{Json, PageParams, Paged, Query as QueryParams};
use crate::state::AppState;
use domain::coupons::manage::{self, CouponCreate, CouponView};
use domain::error::Problem;
use domain::{Action, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(create);
}

/// Creates a coupon.
#[utoipa::path(tag = "coupons", security(("bearer" = [])),
    request_body = CouponCreate,
    responses((status = 201, body = CouponView), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/coupons")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<CouponCreate>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteCoupons)?;
    let created = manage::create(&state.pool, body, caller.user_id).await?;
    Ok(HttpResponse::Created().json(created))
}

/// Live coupons, newest first.
#[utoipa::path(tag = "coupons", security(("bearer" = [])), params(PageParams),
    responses((status = 200, body = Paged<CouponView>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/coupons")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller,
    QueryParams(paging): QueryParams<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let client = state.pool.get().await?;
    let (items, total) = manage::live(&client, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}
