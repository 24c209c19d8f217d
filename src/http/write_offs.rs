//! Stock write-offs through the branch's actor, their list, the expired
//! batches still holding stock, and the destruction register of the
//! controlled ones (a compliance book: paged 50, CSV, a retention note).

use actix_web::{web, HttpRequest, HttpResponse};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::compliance::{self, BookQuery, BOOK_PAGE_SIZE};
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::books;
use domain::error::Problem;
use domain::window::{day_of, DateWindow, Day};
use domain::write_offs::{
    self, DestructionRow, ExpiredBatch, ListFilter, WriteOff, WriteOffRequest,
};
use domain::{wire, Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(expired)
        .service(destruction_register);
}

/// Writes stock off: one `WRITE_OFF` movement per line, all or nothing.
/// Each line at most what its batch still holds; a controlled medicine
/// needs `witness_name`.
#[utoipa::path(tag = "stock", security(("bearer" = [])),
    request_body = WriteOffRequest,
    responses((status = 201, body = WriteOff),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/stock/write-offs")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<WriteOffRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteOffStock)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let w = body.validate(branch_id, caller.user_id)?;
    let made = state
        .actors
        .branch(branch_id, write_offs::RecordWriteOff(w))
        .await?;
    Ok(HttpResponse::Created().json(made))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WriteOffQuery {
    /// First day (`YYYY-MM-DD`, organisation time zone), inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub from_date: Option<Day>,
    /// Last day, inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub to_date: Option<Day>,
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
}

/// Write-offs newest first, paged (20 per page by default).
#[utoipa::path(tag = "stock", security(("bearer" = [])),
    params(WriteOffQuery, PageParams),
    responses((status = 200, body = Paged<WriteOff>),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/stock/write-offs")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<WriteOffQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let client = state.pool.get().await?;
    let (from, until) = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?
        .bounds(&client)
        .await?;
    let filter = ListFilter {
        branch_id,
        from,
        until,
    };
    let (items, total) = write_offs::list(&client, &filter, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One write-off with its lines.
#[utoipa::path(tag = "stock", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = WriteOff),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/stock/write-offs/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Write-off")?;
    let client = state.pool.get().await?;
    let found = write_offs::get(&client, id)
        .await?
        .filter(|w| caller.can_see_branch(w.branch_id))
        .ok_or_else(|| Error::not_found("Write-off not found"))?;
    Ok(HttpResponse::Ok().json(found))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExpiredQuery {
    /// Admins: any branch (default their own). Others: their own branch only.
    pub branch_id: Option<Uuid>,
}

/// The expired batches of a branch.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExpiredStock {
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// Oldest expiry first (at most 2,000: one write-off's worth).
    pub items: Vec<ExpiredBatch>,
    pub total: i64,
    /// Σ value at cost of the listed batches.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total_value: Decimal,
}

/// The branch's batches past their expiry date that still hold stock, with
/// quantity and value at cost, so one write-off can take them all.
#[utoipa::path(tag = "stock", security(("bearer" = [])),
    params(ExpiredQuery),
    responses((status = 200, body = ExpiredStock),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/stock/expired")]
pub async fn expired(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<ExpiredQuery>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(q.branch_id)?;
    let client = state.pool.get().await?;
    let items = write_offs::expired(&client, branch_id).await?;
    Ok(HttpResponse::Ok().json(ExpiredStock {
        branch_id,
        total: items.len() as i64,
        total_value: items.iter().map(|b| b.value).sum(),
        items,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DestructionRegisterPage {
    pub items: Vec<DestructionRow>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
    /// The statutory record of controlled medicines destroyed.
    pub retention_note: String,
}

/// The destruction register: every write-off line of a controlled medicine
/// in the window, newest first, with its batch, reason, witness and the
/// user who wrote it off.
#[utoipa::path(tag = "compliance", security(("bearer" = [])),
    params(BookQuery, PageParams),
    responses((status = 200, content((DestructionRegisterPage = "application/json"), (String = "text/csv"))),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/compliance/destruction-register")]
pub async fn destruction_register(
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
        let (rows, _) = write_offs::destruction_register(&client, scope, None).await?;
        return compliance::csv_response("destruction-register", &rows);
    }
    let paging = Some((page.offset(), page.limit()));
    let (items, total) = write_offs::destruction_register(&client, scope, paging).await?;
    Ok(HttpResponse::Ok().json(DestructionRegisterPage {
        items,
        total,
        page: page.page,
        page_size: page.page_size,
        retention_note: books::DESTRUCTION_REGISTER_NOTE.to_owned(),
    }))
}
