//! Operations endpoints outside `/api/v1`: liveness, readiness, metrics.

use actix_web::{web, HttpResponse};
use prometheus::Encoder;

use crate::state::AppState;
use crate::telemetry;
use domain::error::{Code, Problem};
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

/// The primary database is reachable and takes writes. While it cannot be
/// reached (a failover under way, the database restarting) or the node
/// `DATABASE_URL` leads to is a read-only replica, the answer is 503 with
/// Retry-After, so that a load balancer stops sending this process work it
/// would refuse anyway.
#[utoipa::path(tag = "operations",
    responses((status = 200, description = "Ready", body = Health), (status = 503, body = Problem, content_type = "application/problem+json")))]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse> {
    if !domain::db::takes_writes(&state.pool).await {
        return Err(primary_away());
    }
    Ok(HttpResponse::Ok().json(Health { status: "ready" }))
}

fn primary_away() -> Error {
    Error::Unavailable {
        detail: "The primary database cannot be reached, or the node reached is a read-only replica; writes are refused until it is back or a replica takes over.".to_owned(),
        retry_after: 2,
        code: Code::DatabaseUnavailable,
    }
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
