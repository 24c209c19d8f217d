//! `/dashboard`: today's figures and the branch comparison. Any signed-in
//! user; days are the organisation's calendar days (`settings.time_zone`).
//! Read from the read replica while it is within its lag bound
//! (`domain::dashboard::connect`, as the console's dashboard).

use actix_web::{web, HttpResponse};
use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::Query;
use crate::state::AppState;
use domain::dashboard::{self, BranchRevenue, Summary, SPARKLINE_DAYS};
use domain::error::Problem;
use domain::reports::DEFAULT_WINDOW_DAYS;
use domain::window::{day_of, DateWindow, Day};
use domain::{wire, Result};

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(summary).service(branch_comparison);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SummaryQuery {
    /// Admins: one branch (default: the whole organisation). Others always
    /// see their own branch; naming another is 403.
    pub branch_id: Option<Uuid>,
}

/// Today's sales against yesterday, the 30-day sparkline, stock and expiry counts.
#[utoipa::path(tag = "dashboard", security(("bearer" = [])),
    params(SummaryQuery),
    responses((status = 200, body = Summary),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/dashboard/summary")]
pub async fn summary(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<SummaryQuery>,
) -> Result<HttpResponse> {
    let branch = caller.branch_filter(q.branch_id)?;
    let client = dashboard::connect(&state.reads()).await?;
    let days = DateWindow::optional(None, None)?
        .or_last_days(&client, SPARKLINE_DAYS)
        .await?;
    let worth = domain::Action::ReadStockValue.permits(caller.role);
    let summary = dashboard::summary(&client, branch, &days, worth).await?;
    Ok(HttpResponse::Ok().json(summary))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ComparisonQuery {
    /// First day (`YYYY-MM-DD`, organisation time zone), inclusive; default
    /// 29 days before `to_date`.
    #[param(value_type = Option<String>, format = Date)]
    pub from_date: Option<Day>,
    /// Last day, inclusive; default today. At most 366 days after `from_date`.
    #[param(value_type = Option<String>, format = Date)]
    pub to_date: Option<Day>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BranchComparison {
    #[schema(value_type = String, format = Date)]
    pub from_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub to_date: NaiveDate,
    pub total_sales_count: i64,
    /// Sales less credit notes of the window.
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total_revenue: Decimal,
    /// Credit notes issued in the window (already taken off the revenue).
    pub returns_count: i64,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub returns_total: Decimal,
    /// Admins: every active branch, revenue descending (ties by name).
    /// Anyone else: its own branch only, its share of its own total.
    pub items: Vec<BranchRevenue>,
    /// Rows returned.
    pub total: i64,
}

/// Every active branch ranked by revenue over the window (default the last
/// 30 days), with its share of the total. A non-admin sees only its own
/// branch: the totals are its own and `share_pct` is of its own revenue
/// (100, or 0 without sales), so no other branch's figure can be derived.
#[utoipa::path(tag = "dashboard", security(("bearer" = [])),
    params(ComparisonQuery),
    responses((status = 200, body = BranchComparison),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/dashboard/branch-comparison")]
pub async fn branch_comparison(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<ComparisonQuery>,
) -> Result<HttpResponse> {
    let branch = caller.branch_filter(None)?;
    let window = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?;
    let client = dashboard::connect(&state.reads()).await?;
    let window = window.or_last_days(&client, DEFAULT_WINDOW_DAYS).await?;
    let items = dashboard::branch_comparison(&client, &window, branch).await?;
    Ok(HttpResponse::Ok().json(BranchComparison {
        from_date: window.from,
        to_date: window.to,
        total_sales_count: items.iter().map(|b| b.sales_count).sum(),
        total_revenue: items.iter().map(|b| b.revenue).sum(),
        returns_count: items.iter().map(|b| b.returns_count).sum(),
        returns_total: items.iter().map(|b| b.returns_total).sum(),
        total: items.len() as i64,
        items,
    }))
}
