//! Supplier returns and their debit notes: stock sent back through the
//! branch's actor, the list and one return, and the register of supplier
//! returns of controlled medicines (a compliance book: paged 50, CSV, a
//! retention note). A debit note settles invoices as a supplier payment
//! (`method: debit_note`, see `supplier_finance`).

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::compliance::{self, BookQuery, BOOK_PAGE_SIZE};
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::books;
use domain::buying::returns::{
    self, ListFilter, SupplierReturn, SupplierReturnRegisterRow, SupplierReturnRequest,
};
use domain::error::Problem;
use domain::{Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(register);
}

/// Sends stock back to its supplier for a debit note: one
/// `RETURN_TO_SUPPLIER` movement per line, all or nothing. Each batch must
/// be the branch's, received from this supplier, and hold the units (base
/// units); a recalled or expired batch goes back too. The lines are valued
/// at batch cost; the note settles that supplier's invoices.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    request_body = SupplierReturnRequest,
    responses((status = 201, body = SupplierReturn),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/supplier-returns")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<SupplierReturnRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ReturnToSupplier)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let r = body.validate(branch_id, caller.user_id)?;
    let made = state
        .actors
        .branch(branch_id, returns::RecordSupplierReturn(r))
        .await?;
    Ok(HttpResponse::Created().json(made))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SupplierReturnQuery {
    /// Only this supplier's returns.
    pub supplier_id: Option<Uuid>,
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
}

/// Supplier returns newest first, paged (20 per page by default).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(SupplierReturnQuery, PageParams),
    responses((status = 200, body = Paged<SupplierReturn>),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/supplier-returns")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<SupplierReturnQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadSupplierReturns)?;
    let page = paging.resolve(returns::PAGE_SIZE)?;
    let filter = ListFilter {
        branch_id: caller.branch_filter(q.branch_id)?,
        supplier_id: q.supplier_id,
    };
    let client = state.pool.get().await?;
    let (items, total) = returns::list(&client, &filter, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One supplier return with its lines and what its debit note has settled.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = SupplierReturn),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/supplier-returns/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadSupplierReturns)?;
    let id = path_id(&id, "Supplier return")?;
    let client = state.pool.get().await?;
    let found = returns::get(&client, id)
        .await?
        .filter(|r| caller.can_see_branch(r.branch_id))
        .ok_or_else(|| Error::not_found("Supplier return not found"))?;
    Ok(HttpResponse::Ok().json(found))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SupplierReturnRegisterPage {
    pub items: Vec<SupplierReturnRegisterRow>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
    /// The statutory record of controlled medicines sent back to suppliers.
    pub retention_note: String,
}

/// The register of supplier returns: every supplier-return line of a
/// controlled medicine in the window, newest first, with its batch,
/// supplier, debit note, reason and the user who returned it.
#[utoipa::path(tag = "compliance", security(("bearer" = [])),
    operation_id = "getSupplierReturnsRegister",
    params(BookQuery, PageParams),
    responses((status = 200, content((SupplierReturnRegisterPage = "application/json"), (String = "text/csv"))),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/compliance/supplier-returns")]
pub async fn register(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    Query(q): Query<BookQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(BOOK_PAGE_SIZE)?;
    let (scope, csv) = compliance::scope(&state, &caller, &req, &q).await?;
    let client = books::connect(&state.reads()).await?;
    if csv {
        let (rows, _) = returns::register(&client, scope, None).await?;
        return compliance::csv_response("supplier-returns-register", &rows);
    }
    let paging = Some((page.offset(), page.limit()));
    let (items, total) = returns::register(&client, scope, paging).await?;
    Ok(HttpResponse::Ok().json(SupplierReturnRegisterPage {
        items,
        total,
        page: page.page,
        page_size: page.page_size,
        retention_note: returns::REGISTER_NOTE.to_owned(),
    }))
}
