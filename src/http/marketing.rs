//! `/marketing/contact`: the public enquiry form (no token). Enquiries are
//! limited per email address and per client address, counted in the
//! database so the limits hold across server processes.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::extract::{client_address, Json};
use crate::state::AppState;
use domain::error::Problem;
use domain::marketing::{self, ContactRequest, EnquiryLimits};
use domain::Result;

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(contact);
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ContactAccepted {
    /// Always true.
    pub ok: bool,
}

/// Stores a public enquiry. Public: no token.
#[utoipa::path(tag = "marketing",
    request_body = ContactRequest,
    responses((status = 201, body = ContactAccepted), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 429, body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds until the window ends")))))]
#[post("/marketing/contact")]
pub async fn contact(
    state: web::Data<AppState>,
    req: HttpRequest,
    Json(body): Json<ContactRequest>,
) -> Result<HttpResponse> {
    let cfg = &state.config.marketing;
    let limits = EnquiryLimits {
        per_email: cfg.enquiries_per_email,
        per_address: cfg.enquiries_per_address,
        window_secs: cfg.window_secs,
    };
    let address = client_address(&req, state.config.http.trust_forwarded_for);
    marketing::receive(&state.pool, limits, body, address).await?;
    Ok(HttpResponse::Created().json(ContactAccepted { ok: true }))
}
