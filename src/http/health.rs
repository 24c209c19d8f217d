//! Operations endpoints outside `/api/v1`: liveness, readiness, metrics.

use actix_web::{web, HttpResponse};
use prometheus::Encoder;

use crate::state::AppState;
use crate::telemetry;
use domain::error::Problem;
use domain::{Error, Result};

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(healthz).service(readyz).service(metrics);
}

/// The answer of `/healthz` and `/readyz`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` (the process is up) or `ready` (the database answers).
    #[schema(examples("ok", "ready"))]
    pub status: &'static str,
}

/// The process is up.
#[utoipa::path(tag = "operations", responses((status = 200, description = "Up", body = Health)))]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Health { status: "ok" })
}

/// The database is reachable.
#[utoipa::path(tag = "operations",
    responses((status = 200, description = "Ready", body = Health), (status = 503, body = Problem, content_type = "application/problem+json")))]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse> {
    let client = state
        .pool
        .get()
        .await
        .map_err(|_| Error::database_unavailable(2))?;
    client
        .simple_query("SELECT 1")
        .await
        .map_err(|_| Error::database_unavailable(2))?;
    Ok(HttpResponse::Ok().json(Health { status: "ready" }))
}

/// Prometheus text exposition.
#[utoipa::path(tag = "operations", responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
#[get("/metrics")]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    telemetry::record_pool(&state.pool);
    let mut buf = Vec::new();
    let encoder = prometheus::TextEncoder::new();
    if encoder.encode(&prometheus::gather(), &mut buf).is_err() {
        return HttpResponse::InternalServerError().finish();
    }
    HttpResponse::Ok()
        .content_type(encoder.format_type())
        .body(buf)
}
