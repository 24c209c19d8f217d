//! `/audit-log`: who changed what and when, with the values before and
//! after, for admins and auditors. Each entry belongs to the branch of what
//! it records (or of its actor), or to no branch for organisation-wide
//! records (settings, the catalogue). An admin reads every entry, or one
//! branch's with `branch_id`; an auditor its own branch's and the
//! organisation-wide ones, and naming another branch is 403.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{PageParams, Paged, Query};
use crate::state::AppState;
use domain::audit::{self, AuditRow};
use domain::error::Problem;
use domain::window::{day_of, DateWindow, Day};
use domain::{Action, Result};

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// `settings`, `user`, `batch`, ... (exact).
    pub entity_type: Option<String>,
    /// One entity's entries (exact).
    pub entity_id: Option<String>,
    /// One actor's entries.
    pub actor_id: Option<Uuid>,
    /// Admins: one branch's entries and the organisation-wide ones. Others
    /// may name only their own branch (else 403).
    pub branch_id: Option<Uuid>,
    /// First day (`YYYY-MM-DD`, organisation time zone), inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub from_date: Option<Day>,
    /// Last day, inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub to_date: Option<Day>,
}

fn exact(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// Audit-log entries newest first, 20 per page (at most 200).
#[utoipa::path(tag = "audit", security(("bearer" = [])),
    params(AuditQuery, PageParams),
    responses((status = 200, body = Paged<AuditRow>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/audit-log")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<AuditQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadAuditLog)?;
    let branch = caller.branch_filter(q.branch_id)?;
    let page = paging.resolve(20)?;
    let window = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?;
    let client = state.pool.get().await?;
    let (from, until) = window.bounds(&client).await?;
    let filter = audit::ListFilter {
        entity_type: exact(q.entity_type),
        entity_id: exact(q.entity_id),
        actor_id: q.actor_id,
        branch,
        from,
        until,
    };
    let (items, total) = audit::list(&client, &filter, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}
