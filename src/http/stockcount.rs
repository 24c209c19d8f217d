//! `/stockcount/submit`: a shelf count applied as stock adjustments on the
//! caller's branch, through the branch actor.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::Json;
use crate::state::AppState;
use domain::error::Problem;
use domain::stock::count::{CountLine, CountResult, SubmitCount};
use domain::{input, Action, Error, Result};

use actix_web::post;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(submit);
}

/// Lines one count may carry.
/// Most lines one stock count may carry.
pub const MAX_ITEMS: usize = 2000;

#[derive(Debug, Deserialize, ToSchema)]
pub struct CountRequest {
    /// Required, non-empty; each medicine at most once.
    pub items: Option<Vec<CountRequestItem>>,
    /// Admins only: count on another branch.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CountRequestItem {
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    /// Units on the shelf: a whole number, 0 or more.
    #[schema(value_type = f64, minimum = 0)]
    pub counted_quantity: Decimal,
    pub notes: Option<String>,
}

/// Checks the shape of the count; medicines are checked in the transaction.
fn lines(items: Option<Vec<CountRequestItem>>) -> Result<Vec<CountLine>> {
    let items = items.unwrap_or_default();
    if items.is_empty() {
        return Err(Error::validation(
            "items",
            "A stock count needs at least one item.",
        ));
    }
    if items.len() > MAX_ITEMS {
        return Err(Error::validation(
            "items",
            format!("A stock count may have at most {MAX_ITEMS} items."),
        ));
    }
    let mut seen: HashMap<Uuid, usize> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if let Some(first) = seen.insert(item.medicine_id, i) {
            return Err(Error::validation(
                format!("items[{i}].medicine_id"),
                format!("This medicine is already counted in items[{first}]."),
            ));
        }
        out.push(CountLine {
            index: i,
            medicine_id: item.medicine_id,
            counted_quantity: input::whole(
                &format!("items[{i}].counted_quantity"),
                item.counted_quantity,
                0,
            )?,
            notes: input::multiline(
                &format!("items[{i}].notes"),
                item.notes.as_deref().unwrap_or(""),
                500,
            )?,
        });
    }
    Ok(out)
}

/// Applies a stock count: a surplus lands on the newest batch, a shortfall
/// drains the oldest batches first.
#[utoipa::path(tag = "stock", security(("bearer" = [])),
    request_body = CountRequest,
    responses((status = 200, body = CountResult), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/stockcount/submit")]
pub async fn submit(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<CountRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::SubmitStockCount)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let lines = lines(body.items)?;
    if body.branch_id.is_some() {
        let client = state.pool.get().await?;
        domain::branches::get(&client, branch_id)
            .await?
            .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?;
    }
    let result = state
        .actors
        .branch(
            branch_id,
            SubmitCount {
                branch_id,
                user_id: caller.user_id,
                lines,
            },
        )
        .await?;
    Ok(HttpResponse::Ok().json(result))
}
