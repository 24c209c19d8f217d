//! `GET /scan`: what a scanner's code names, for the caller's branch.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Signed;
use crate::http::extract::Query;
use crate::state::AppState;
use domain::error::Problem;
use domain::scan::{self, ScanResult};
use domain::{Error, Result};

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(read);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScanQuery {
    /// What the scanner sent: a GS1 element string (with or without `]d2`,
    /// `]C1` or `]Q3`; FNC1 as the group separator or in parentheses), a
    /// bare GTIN, or a medicine's in-house barcode.
    pub code: Option<String>,
    /// Admins: the branch whose batch and stock to show (default their own).
    pub branch_id: Option<Uuid>,
}

/// Reads a scanned code: the medicine and pack its GTIN names, its batch,
/// expiry and serial, this branch's batch and warnings. Writes nothing.
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(ScanQuery),
    responses((status = 200, body = ScanResult), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/scan")]
pub async fn read(
    state: web::Data<AppState>,
    signed: Signed,
    Query(q): Query<ScanQuery>,
) -> Result<HttpResponse> {
    let code = q.code.filter(|c| !c.trim().is_empty());
    let code = signed
        .refuse_after_check(
            &state.pool,
            code.ok_or_else(|| {
                Error::validation("code", "The query parameter `code` is required.")
            }),
        )
        .await?;
    let branch = signed
        .refuse_after_check(&state.pool, signed.claimed().branch_scope(q.branch_id))
        .await?;
    let client = state.pool.get().await?;
    let (_, found) = signed
        .check_with(&client, scan::scan(&client, &code, branch))
        .await?;
    Ok(HttpResponse::Ok().json(found))
}
