//! `/purchases`: receiving a stock batch (admin or pharmacist), through the
//! branch's actor.

use actix_web::{web, HttpResponse};
use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::Json;
use crate::state::AppState;
use domain::error::Problem;
use domain::input;
use domain::stock::receiving::{ReceivePurchase, ReceivedBatch};
use domain::stock::NewBatch;
use domain::{Action, Result};

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create);
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PurchaseRequest {
    #[schema(value_type = String, format = Uuid)]
    pub supplier_id: Uuid,
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    #[schema(value_type = String, format = Uuid)]
    pub branch_id: Uuid,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: NaiveDate,
    /// Positive whole number (a number or a numeric string).
    #[schema(value_type = f64, minimum = 1)]
    pub quantity: Decimal,
    /// Cost per unit (a number or a decimal string).
    #[schema(value_type = f64, minimum = 0)]
    pub unit_cost: Decimal,
    #[schema(value_type = Option<String>, format = Date)]
    pub manufacturing_date: Option<NaiveDate>,
    pub notes: Option<String>,
}

/// Receives a batch and records its IN movement in one transaction.
#[utoipa::path(tag = "purchases", security(("bearer" = [])),
    request_body = PurchaseRequest,
    responses((status = 201, body = ReceivedBatch), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchases")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<PurchaseRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ReceivePurchases)?;
    let branch_id = caller.branch_scope(Some(body.branch_id))?;
    let batch = NewBatch {
        medicine_id: body.medicine_id,
        branch_id,
        supplier_id: Some(body.supplier_id),
        batch_number: input::required_text("batch_number", &body.batch_number, input::max::LABEL)?,
        expiry_date: body.expiry_date,
        manufacturing_date: body.manufacturing_date,
        quantity: input::quantity("quantity", body.quantity)?,
        unit_cost: input::amount("unit_cost", body.unit_cost)?,
        origin: "purchase",
        notes: input::multiline(
            "notes",
            body.notes.as_deref().unwrap_or_default(),
            input::max::NOTES,
        )?,
        user_id: caller.user_id,
    };
    if body
        .manufacturing_date
        .is_some_and(|m| m > body.expiry_date)
    {
        return Err(domain::Error::validation(
            "manufacturing_date",
            "`manufacturing_date` must not be after `expiry_date`.",
        ));
    }
    let received = state
        .actors
        .branch(branch_id, ReceivePurchase { batch })
        .await?;
    Ok(HttpResponse::Created().json(received))
}
