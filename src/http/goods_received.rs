//! `/goods-received`: deliveries drafted as notes and posted as batches at
//! landed cost through the branch's actor (`domain::buying::received`).

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::buying::received::{
    self, GoodsReceivedNote, GoodsReceivedRequest, ListFilter, PostNote, PostOptions,
};
use domain::error::Problem;
use domain::{input, Action, Error, Result};

use actix_web::{delete, get, post, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create)
        .service(list)
        .service(get)
        .service(replace)
        .service(discard)
        .service(post_note);
}

/// The states a note may be listed by.
pub const STATUSES: [&str; 2] = ["draft", "posted"];

/// Drafts a delivery: its lines (against order lines or unplanned), rejects
/// and charges, each line's share of the charges and its landed cost.
/// Nothing moves stock until the note is posted.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    request_body = GoodsReceivedRequest,
    responses((status = 201, body = GoodsReceivedNote),
        (status = 400, description = "A field is missing or wrong, or names no supplier, medicine, pack or open order line of this supplier and branch (`validation_failed` naming it)", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/goods-received")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<GoodsReceivedRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ReceiveGoods)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let note = body.validate(branch_id, caller.user_id)?;
    let made = received::create(&state.pool, note).await?;
    Ok(HttpResponse::Created().json(made))
}

/// Replaces a draft's supplier, order, reference, lines and charges
/// (checked as on create), keeping its number. A posted note, or a draft an
/// invoice already bills, is never edited (409).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    request_body = GoodsReceivedRequest,
    responses((status = 200, body = GoodsReceivedNote),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[put("/goods-received/{id}")]
pub async fn replace(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<GoodsReceivedRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ReceiveGoods)?;
    let id = path_id(&id, "Goods received note")?;
    let note = visible(&state, &caller, id).await?;
    let new = body.validate(note.branch_id, caller.user_id)?;
    Ok(HttpResponse::Ok().json(received::replace(&state.pool, id, new).await?))
}

/// Discards a draft (204). A posted note, or a draft an invoice already
/// bills, stays (409).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[delete("/goods-received/{id}")]
pub async fn discard(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ReceiveGoods)?;
    let id = path_id(&id, "Goods received note")?;
    let note = visible(&state, &caller, id).await?;
    received::discard(&state.pool, id, note.branch_id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// What a poster allows beyond the rules.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct PostRequest {
    /// Branch managers and admins: receive more than an order line has
    /// outstanding (recorded on the note).
    #[serde(default)]
    pub allow_over_receipt: bool,
    /// Branch managers, pharmacists and admins: receive stock expiring
    /// within `settings.min_shelf_life_days` (recorded on the note).
    #[serde(default)]
    pub accept_short_dated: bool,
}

/// Posts a draft note, all or nothing: each accepted line becomes a batch
/// at its landed cost with an `IN` movement, and its orders' received
/// quantities and status move.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    request_body(content = Option<PostRequest>),
    responses((status = 200, body = GoodsReceivedNote),
        (status = 400, description = "A line is expired or short-dated, or receives more than its order line has outstanding (`validation_failed` naming the line)", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The note is already posted, or an order it receives against is no longer open", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/goods-received/{id}/post")]
pub async fn post_note(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    body: Option<Json<PostRequest>>,
) -> Result<HttpResponse> {
    caller.require(Action::ReceiveGoods)?;
    let body = body.map(|Json(b)| b).unwrap_or_default();
    if body.allow_over_receipt && !Action::AllowOverReceipt.permits(caller.role) {
        return Err(Error::forbidden(
            "Only a branch manager or an admin may receive more than an order has outstanding.",
        ));
    }
    if body.accept_short_dated && !Action::AcceptShortDated.permits(caller.role) {
        return Err(Error::forbidden(
            "Only a branch manager, a pharmacist or an admin may accept short-dated stock.",
        ));
    }
    let id = path_id(&id, "Goods received note")?;
    let note = visible(&state, &caller, id).await?;
    let command = PostNote {
        id,
        options: PostOptions {
            allow_over_receipt: body.allow_over_receipt,
            accept_short_dated: body.accept_short_dated,
        },
        user_id: caller.user_id,
    };
    let posted = state.actors.branch(note.branch_id, command).await?;
    Ok(HttpResponse::Ok().json(posted))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NoteQuery {
    /// `draft` or `posted`.
    #[param(schema_with = status_schema)]
    pub status: Option<String>,
    pub supplier_id: Option<Uuid>,
    pub purchase_order_id: Option<Uuid>,
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
}

fn status_schema() -> utoipa::openapi::schema::Schema {
    input::one_of_or_blank_schema(&STATUSES)
}

/// Goods received notes newest first, paged (20 per page by default).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    operation_id = "listGoodsReceivedNotes",
    params(NoteQuery, PageParams),
    responses((status = 200, body = Paged<GoodsReceivedNote>),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/goods-received")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<NoteQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadGoodsReceived)?;
    let page = paging.resolve(20)?;
    let filter = ListFilter {
        branch_id: caller.branch_filter(q.branch_id)?,
        supplier_id: q.supplier_id,
        purchase_order_id: q.purchase_order_id,
        status: input::one_of_or_blank("status", q.status.as_deref(), &STATUSES)?,
    };
    let client = state.pool.get().await?;
    let (items, total) = received::list(&client, &filter, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One goods received note with its lines, charges and landed costs.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    operation_id = "getGoodsReceivedNote",
    params(("id" = String, Path)),
    responses((status = 200, body = GoodsReceivedNote),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/goods-received/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadGoodsReceived)?;
    let id = path_id(&id, "Goods received note")?;
    Ok(HttpResponse::Ok().json(visible(&state, &caller, id).await?))
}

/// The note, if the caller's branch may see it (404 otherwise).
async fn visible(state: &AppState, caller: &Caller, id: Uuid) -> Result<GoodsReceivedNote> {
    let client = state.pool.get().await?;
    received::get(&client, id)
        .await?
        .filter(|n| caller.can_see_branch(n.branch_id))
        .ok_or_else(|| Error::not_found("Goods received note not found"))
}
