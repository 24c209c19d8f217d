//! `/supplier-finance`: batch quarantine and reorder suggestions.

use actix_web::{web, HttpResponse};
use chrono::Utc;
use sea_query::{Expr, ExprTrait, LockType, Query};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, Query as QueryParams};
use crate::state::AppState;
use crate::store::audit;
use actors::changes::{self, Op};
use actors::error::Problem;
use actors::stock::{self, Batch};
use actors::{db, Error, Result, Role};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/supplier-finance/batches/{id}/quarantine")
            .route(web::post().to(quarantine)),
    )
    .service(
        web::resource("/supplier-finance/reorder-suggestions")
            .route(web::get().to(reorder_suggestions)),
    );
}

const STOCK_ROLES: &[Role] = &[
    Role::Admin,
    Role::BranchManager,
    Role::InventoryManager,
    Role::Pharmacist,
];
pub const REGULATOR_STATUSES: [&str; 3] = ["quarantined", "active", "recalled"];
const SUGGESTION_LIMIT: i64 = 100;

#[derive(Debug, Deserialize, ToSchema)]
pub struct QuarantineRequest {
    /// `quarantined`, `active` or `recalled`.
    pub status: String,
}

/// Sets a batch's regulator status. Quarantined and recalled batches are
/// never sold or transferred.
#[utoipa::path(post, path = "/api/v1/supplier-finance/batches/{id}/quarantine", tag = "supplier-finance",
    security(("bearer" = [])), params(("id" = String, Path, description = "Batch id")),
    request_body = QuarantineRequest,
    responses((status = 200, body = Batch), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn quarantine(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<QuarantineRequest>,
) -> Result<HttpResponse> {
    caller.require(STOCK_ROLES)?;
    let id = path_id(&id, "Batch")?;
    let status = body.status.trim().to_lowercase();
    if !REGULATOR_STATUSES.contains(&status.as_str()) {
        return Err(Error::validation(
            "status",
            "`status` must be `quarantined`, `active` or `recalled`.",
        ));
    }
    let not_found = || Error::not_found("Batch not found");
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    // Other branches' batches read as missing to a non-admin.
    let own = (!caller.is_admin()).then_some(caller.branch_id);
    let current = Query::select()
        .column("regulator_status")
        .from("batches")
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(own, |q, b| {
            q.and_where(Expr::col("branch_id").eq(b));
        })
        .lock(LockType::Update)
        .to_owned();
    let before: String = db::fetch_opt(&tx, &current)
        .await?
        .ok_or_else(not_found)?
        .get(0);
    let rev = changes::allocate(&tx).await?;
    let update = Query::update()
        .table("batches")
        .value("regulator_status", status.clone())
        .value("rev", rev)
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(id))
        .returning(Query::returning().columns(stock::COLUMNS))
        .to_owned();
    let batch = db::fetch_opt(&tx, &update)
        .await?
        .map(|r| Batch::from_row(&r))
        .ok_or_else(not_found)?;
    stock::emit(&tx, rev, &batch, Op::Update).await?;
    audit::write(
        &tx,
        audit::Entry {
            actor_id: Some(caller.user_id),
            action: "batch.regulator_status",
            entity_type: "batch",
            entity_id: id.to_string(),
            before: Some(serde_json::json!({ "regulator_status": before })),
            after: Some(serde_json::json!({ "regulator_status": status })),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(batch))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReorderQuery {
    /// Admins only: one branch's stock (default: the whole chain).
    pub branch_id: Option<Uuid>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReorderSuggestion {
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub name: String,
    /// Units on hand in the scope (branch or chain).
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
    /// `2 × low_stock_threshold − stock_quantity`.
    pub suggested_qty: i64,
    /// Supplier of the most recently received batch naming one.
    #[schema(value_type = Option<String>)]
    pub supplier_id: Option<Uuid>,
    pub supplier_name: Option<String>,
    pub lead_time_days: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReorderList {
    /// Lowest stock first, at most 100.
    pub items: Vec<ReorderSuggestion>,
    /// Rows returned.
    pub total: i64,
}

/// Active medicines at or below their low-stock threshold, lowest stock first.
#[utoipa::path(get, path = "/api/v1/supplier-finance/reorder-suggestions", tag = "supplier-finance",
    security(("bearer" = [])), params(ReorderQuery),
    responses((status = 200, body = ReorderList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
pub async fn reorder_suggestions(
    state: web::Data<AppState>,
    caller: Caller,
    QueryParams(q): QueryParams<ReorderQuery>,
) -> Result<HttpResponse> {
    caller.require(STOCK_ROLES)?;
    let branch = caller.branch_filter(q.branch_id)?;
    let client = state.pool.get().await?;
    if let (Some(b), true) = (branch, q.branch_id.is_some()) {
        crate::store::branches::get(&client, b)
            .await?
            .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?;
    }
    // `branch` NULL means the whole chain.
    let sql = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH on_hand AS (
               SELECT medicine_id, sum(qty_remaining)::bigint AS qty
               FROM batches
               WHERE NOT is_deleted AND ({branch}::uuid IS NULL OR branch_id = {branch}::uuid)
               GROUP BY medicine_id
           ), last_supplier AS (
               SELECT DISTINCT ON (medicine_id) medicine_id, supplier_id
               FROM batches
               WHERE NOT is_deleted AND supplier_id IS NOT NULL
                 AND ({branch}::uuid IS NULL OR branch_id = {branch}::uuid)
               ORDER BY medicine_id, created_at DESC, id DESC
           )
           SELECT m.id, m.name, coalesce(h.qty, 0)::bigint AS stock_quantity,
                  m.low_stock_threshold, s.id AS supplier_id, s.name AS supplier_name,
                  s.lead_time_days
           FROM medicines m
           LEFT JOIN on_hand h ON h.medicine_id = m.id
           LEFT JOIN last_supplier ls ON ls.medicine_id = m.id
           LEFT JOIN suppliers s ON s.id = ls.supplier_id
           WHERE m.is_active AND NOT m.is_deleted
             AND coalesce(h.qty, 0) <= m.low_stock_threshold
           ORDER BY stock_quantity, m.name, m.id
           LIMIT {SUGGESTION_LIMIT}"#
    );
    let rows = db::raw_all(&client, &sql.sql, sql.values).await?;
    let items: Vec<ReorderSuggestion> = rows
        .iter()
        .map(|r| {
            let stock_quantity: i64 = r.get("stock_quantity");
            let low_stock_threshold: i32 = r.get("low_stock_threshold");
            ReorderSuggestion {
                medicine_id: r.get("id"),
                name: r.get("name"),
                stock_quantity,
                low_stock_threshold,
                suggested_qty: 2 * i64::from(low_stock_threshold) - stock_quantity,
                supplier_id: r.get("supplier_id"),
                supplier_name: r.get("supplier_name"),
                lead_time_days: r.get("lead_time_days"),
            }
        })
        .collect();
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(ReorderList { items, total }))
}
