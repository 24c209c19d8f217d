//! `/medicines/{id}/packs`: a medicine's packs. Anyone signed in reads;
//! admins and inventory managers write.

use actix_web::{web, HttpResponse};

use crate::auth::{Caller, Signed};
use crate::http::extract::{path_id, Json};
use crate::state::AppState;
use domain::error::Problem;
use domain::packs::{self, Pack, PackWrite};
use domain::{Action, Result};

use actix_web::{delete, get, post, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(update)
        .service(delete);
}

/// A medicine's packs (deactivated ones too), fewest units first.
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Vec<Pack>), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/medicines/{id}/packs")]
pub async fn list(
    state: web::Data<AppState>,
    signed: Signed,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = signed
        .refuse_after_check(&state.pool, path_id(&id, "Medicine"))
        .await?;
    let client = state.pool.get().await?;
    let (_, found) = signed
        .check_with(&client, packs::list(&client, id, false))
        .await?;
    Ok(HttpResponse::Ok().json(found))
}

/// Adds a pack to a medicine: `name` and `units` required; two active packs
/// of one medicine never share a unit count or a name (409).
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = PackWrite,
    responses((status = 201, body = Pack), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/medicines/{id}/packs")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<PackWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePacks)?;
    let id = path_id(&id, "Medicine")?;
    let pack = packs::create(&state.pool, id, body).await?;
    Ok(HttpResponse::Created().json(pack))
}

/// Changes the fields sent of a medicine's pack.
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path), ("packId" = String, Path)), request_body = PackWrite,
    responses((status = 200, body = Pack), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[put("/medicines/{id}/packs/{packId}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    ids: web::Path<(String, String)>,
    Json(body): Json<PackWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePacks)?;
    let (medicine, pack) = (path_id(&ids.0, "Medicine")?, path_id(&ids.1, "Pack")?);
    let pack = packs::update(&state.pool, medicine, pack, body).await?;
    Ok(HttpResponse::Ok().json(pack))
}

/// Deletes a pack (soft: sales and receipts naming it keep it).
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path), ("packId" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/medicines/{id}/packs/{packId}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    ids: web::Path<(String, String)>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePacks)?;
    let (medicine, pack) = (path_id(&ids.0, "Medicine")?, path_id(&ids.1, "Pack")?);
    packs::delete(&state.pool, medicine, pack).await?;
    Ok(HttpResponse::NoContent().finish())
}
