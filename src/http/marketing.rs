//! `/marketing/contact`: the public enquiry form (no token). Enquiries are
//! limited per email address and per client address, counted in the
//! database so the limits hold across server processes.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::http::extract::{client_address, Json};
use crate::state::AppState;
use domain::error::Problem;
use domain::marketing::{self, Enquiry};
use domain::users::rate_limits;
use domain::{input, Error, Result};

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(contact);
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ContactRequest {
    /// Required, non-blank.
    pub name: Option<String>,
    /// Required; one `@`, a non-empty local part, a dot in the domain, no spaces.
    pub email: Option<String>,
    pub phone: Option<String>,
    pub topic: Option<String>,
    /// Required, non-blank, at most 5,000 characters.
    pub message: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ContactAccepted {
    /// Always true.
    pub ok: bool,
}

/// A structural check only: whether mail can be delivered is not ours to know.
fn address_like(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && !email.chars().any(char::is_whitespace)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
}

fn enquiry(body: ContactRequest, client_address: String) -> Result<Enquiry> {
    let text = |field: &str, v: &Option<String>, max: usize| {
        input::text(field, v.as_deref().unwrap_or_default(), max)
    };
    let required = |field: &str, v: &Option<String>, max: usize| {
        input::required_text(field, v.as_deref().unwrap_or_default(), max)
    };
    let name = required("name", &body.name, 200)?;
    let email = required("email", &body.email, 254)?;
    if !address_like(&email) {
        return Err(Error::validation(
            "email",
            "`email` must be an email address such as name@example.com.",
        ));
    }
    Ok(Enquiry {
        name,
        email,
        phone: text("phone", &body.phone, 50)?,
        topic: text("topic", &body.topic, 100)?,
        message: input::required_multiline(
            "message",
            body.message.as_deref().unwrap_or_default(),
            5000,
        )?,
        client_address,
    })
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
    let address = client_address(&req, state.config.http.trust_forwarded_for);
    // Validate first: a refused (400) message does not count.
    let enquiry = enquiry(body, address.clone())?;
    let email_key = format!("marketing:email:{}", enquiry.email.to_lowercase());
    let addr_key = format!("marketing:addr:{address}");
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    // The counter rows stay locked until commit, so concurrent enquiries are
    // counted one at a time (always email before address: no lock cycle); a
    // refused one rolls back and does not count either.
    let by_email = rate_limits::hit(&tx, &email_key, cfg.window_secs).await?;
    let by_address = rate_limits::hit(&tx, &addr_key, cfg.window_secs).await?;
    if by_email > cfg.enquiries_per_email || by_address > cfg.enquiries_per_address {
        return Err(Error::TooManyRequests {
            detail: "Too many messages in a short time; please wait a minute and try again."
                .to_owned(),
            retry_after: rate_limits::retry_after(cfg.window_secs),
        });
    }
    marketing::insert(&tx, enquiry).await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(ContactAccepted { ok: true }))
}
