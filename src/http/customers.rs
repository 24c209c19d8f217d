//! `/customers`: organisation-wide customers, their credit and ledger.
//! Payments go through the branch actor of the branch taking them.

use actix_web::{web, HttpResponse};
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{Caller, Signed};
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::customers::committed;
use domain::customers::{self, CustomerWrite};
use domain::customers::{CustomerView, LedgerRow, PaymentReceipt, RecordPayment};
use domain::error::Problem;
use domain::input;
use domain::{Action, Error, Result};

use actix_web::{delete, get, post, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(get)
        .service(update)
        .service(delete)
        .service(ledger)
        .service(pay);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CustomerQuery {
    /// Part of the name or phone, or the exact national id.
    pub search: Option<String>,
}

/// Customers by name, 20 per page, optionally filtered by `search`.
#[utoipa::path(tag = "customers", security(("bearer" = [])),
    params(CustomerQuery, PageParams),
    responses((status = 200, body = Paged<CustomerView>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/customers")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller,
    Query(q): Query<CustomerQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let client = state.pool.get().await?;
    let (items, total) = customers::list(&client, q.search.as_deref(), page).await?;
    let items = items.iter().map(|c| c.view()).collect();
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One customer with their credit limit and balance.
#[utoipa::path(tag = "customers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = CustomerView), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/customers/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    signed: Signed,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = signed
        .refuse_after_check(&state.pool, path_id(&id, "Customer"))
        .await?;
    let client = state.pool.get().await?;
    let (_, customer) = signed
        .check_with(&client, customers::get(&client, id))
        .await?;
    let customer = customer.ok_or_else(|| Error::not_found("Customer not found"))?;
    Ok(HttpResponse::Ok().json(customer.view()))
}

/// Creates a customer.
#[utoipa::path(tag = "customers", security(("bearer" = [])),
    request_body = CustomerWrite,
    responses((status = 201, body = CustomerView), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/customers")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<CustomerWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteCustomers)?;
    let customer = committed::create(&state.pool, body, caller.role).await?;
    Ok(HttpResponse::Created().json(customer.view()))
}

/// Changes the fields sent of a customer.
#[utoipa::path(tag = "customers", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = CustomerWrite,
    responses((status = 200, body = CustomerView), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[put("/customers/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<CustomerWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteCustomers)?;
    let id = path_id(&id, "Customer")?;
    let customer = committed::edit(&state.pool, id, body, caller.role).await?;
    Ok(HttpResponse::Ok().json(customer.view()))
}

/// Soft-deletes a customer who owes nothing (409 while a balance is owed).
#[utoipa::path(tag = "customers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[delete("/customers/{id}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteCustomers)?;
    let id = path_id(&id, "Customer")?;
    committed::remove(&state.pool, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The customer's ledger, newest first, 20 per page.
#[utoipa::path(tag = "customers", security(("bearer" = [])),
    params(("id" = String, Path), PageParams),
    responses((status = 200, body = Paged<LedgerRow>), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/customers/{id}/ledger")]
pub async fn ledger(
    state: web::Data<AppState>,
    _caller: Caller,
    id: web::Path<String>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Customer")?;
    let page = paging.resolve(20)?;
    let client = state.pool.get().await?;
    customers::get(&client, id)
        .await?
        .ok_or_else(|| Error::not_found("Customer not found"))?;
    let (items, total) = customers::ledger(&client, id, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PaymentRequest {
    /// More than 0 and at most the current balance.
    #[schema(value_type = f64)]
    pub amount: Decimal,
    pub notes: Option<String>,
    /// Admins only: the branch taking the payment (default their own).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// The client's id for this payment: a retry with the same id answers
    /// the first receipt (200, `Idempotent-Replay: true`) and pays nothing;
    /// the same id with another amount is 409.
    // Its bounds (not blank, `input::max::MUTATION_ID` characters) are
    // documented by the request rules, from the constant the check uses.
    pub client_mutation_id: Option<String>,
}

/// Records a payment against the balance in one transaction.
#[utoipa::path(tag = "customers", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = PaymentRequest,
    responses((status = 201, body = PaymentReceipt),
        (status = 200, description = "A replay of an earlier payment with the same client_mutation_id", body = PaymentReceipt),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/customers/{id}/payments")]
pub async fn pay(
    state: web::Data<AppState>,
    signed: Signed,
    id: web::Path<String>,
    Json(body): Json<PaymentRequest>,
) -> Result<HttpResponse> {
    // The caller as its token states it; the group writer checks the token
    // with the payment's first statement.
    let caller = signed.claimed();
    let decided = (|| {
        caller.require(Action::TakeCustomerPayment)?;
        let customer_id = path_id(&id, "Customer")?;
        let branch_id = caller.branch_scope(body.branch_id)?;
        // Sign and size are judged against the balance in the transaction, so the
        // refusal can name both figures; here only the form.
        input::amount("amount", body.amount.abs())?;
        Ok(RecordPayment {
            customer_id,
            branch_id,
            amount: body.amount.normalize(),
            notes: input::multiline(
                "notes",
                body.notes.as_deref().unwrap_or_default(),
                input::max::NOTES,
            )?,
            user_id: caller.user_id,
            client_mutation_id: body
                .client_mutation_id
                .clone()
                .map(|c| input::required_text("client_mutation_id", &c, input::max::MUTATION_ID))
                .transpose()?,
            signer: Some(signed.signer()),
        })
    })();
    let payment = signed.refuse_after_check(&state.pool, decided).await?;
    let branch_id = payment.branch_id;
    let receipt = state
        .payments
        .submit(&state.actors, branch_id, payment)
        .await?;
    if receipt.replayed {
        return Ok(HttpResponse::Ok()
            .insert_header(("Idempotent-Replay", "true"))
            .json(receipt));
    }
    Ok(HttpResponse::Created().json(receipt))
}
