//! `/reports`: sales, sales by pharmacist, inventory, purchases and VAT.
//! Roles admin, branch_manager and auditor. Windows are `from_date` ..=
//! `to_date` (`YYYY-MM-DD`, organisation time zone), by default the last 30
//! days up to today, at most 366 days. Admins see every branch, or the one
//! `branch_id` names; everyone else (branch managers and auditors) its own
//! branch only, and naming another is 403. Read from the read replica while
//! it is within its lag bound (`domain::reports::connect`).

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::Query;
use crate::state::AppState;
use domain::error::Problem;
use domain::reports::{
    self, InventoryReport, PharmacistReport, PurchasesReport, SalesReport, Scope, VatReport,
    DEFAULT_WINDOW_DAYS,
};
use domain::window::{day_of, DateWindow, Day, ReportWindow};
use domain::{Action, Result};

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(sales)
        .service(by_pharmacist)
        .service(inventory)
        .service(purchases)
        .service(vat);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowQuery {
    /// First day (`YYYY-MM-DD`, organisation time zone), inclusive; default
    /// 29 days before `to_date`.
    #[param(value_type = Option<String>, format = Date)]
    pub from_date: Option<Day>,
    /// Last day, inclusive; default today. At most 366 days after `from_date`.
    #[param(value_type = Option<String>, format = Date)]
    pub to_date: Option<Day>,
    /// One branch (default: every branch for admins, the caller's own for
    /// anyone else, who gets 403 naming another).
    pub branch_id: Option<Uuid>,
}

/// The branch a report covers: an admin's choice (`None`: the chain);
/// anyone else, auditors included, is held to its own branch.
fn report_branch(caller: &Caller, requested: Option<Uuid>) -> Result<Option<Uuid>> {
    caller.require(Action::ReadReports)?;
    caller.branch_filter(requested)
}

/// Role, branch and window checks shared by the windowed reports, then
/// the report itself on one pooled connection.
async fn windowed<T, F>(state: &AppState, caller: &Caller, q: WindowQuery, run: F) -> Result<T>
where
    F: AsyncFnOnce(&deadpool_postgres::Object, &Scope<'_>) -> Result<T>,
{
    let branch = report_branch(caller, q.branch_id)?;
    let window = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?;
    let client = reports::connect(&state.reads()).await?;
    let window: ReportWindow = window.or_last_days(&client, DEFAULT_WINDOW_DAYS).await?;
    run(
        &client,
        &Scope {
            window: &window,
            branch,
        },
    )
    .await
}

/// Totals, takings by day and payment method, the top 10 medicines with
/// gross profit, and the 8 most recent sales.
#[utoipa::path(tag = "reports", security(("bearer" = [])),
    params(WindowQuery),
    responses((status = 200, body = SalesReport),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/reports/sales")]
pub async fn sales(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<WindowQuery>,
) -> Result<HttpResponse> {
    let report = windowed(&state, &caller, q, async |c, s| reports::sales(c, s).await).await?;
    Ok(HttpResponse::Ok().json(report))
}

/// Per user and branch: sales count, revenue, VAT and average sale; revenue descending.
#[utoipa::path(tag = "reports", security(("bearer" = [])),
    params(WindowQuery),
    responses((status = 200, body = PharmacistReport),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/reports/sales/by-pharmacist")]
pub async fn by_pharmacist(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<WindowQuery>,
) -> Result<HttpResponse> {
    let report = windowed(&state, &caller, q, async |c, s| {
        reports::by_pharmacist(c, s).await
    })
    .await?;
    Ok(HttpResponse::Ok().json(report))
}

/// Stock now: totals, value at selling price by category, the 20 emptiest
/// medicines and the expired stock at cost; plus the stock written off in
/// the window (default the last 30 days). With `branch_id`, stock is that
/// branch's ledger sum.
#[utoipa::path(tag = "reports", security(("bearer" = [])),
    params(WindowQuery),
    responses((status = 200, body = InventoryReport),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/reports/inventory")]
pub async fn inventory(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<WindowQuery>,
) -> Result<HttpResponse> {
    let report = windowed(&state, &caller, q, async |c, s| {
        reports::inventory(c, s).await
    })
    .await?;
    Ok(HttpResponse::Ok().json(report))
}

/// Purchased batches received in the window: spend (`qty_received ×
/// unit_cost`) in total, by supplier and for the top 20 medicines.
#[utoipa::path(tag = "reports", security(("bearer" = [])),
    params(WindowQuery),
    responses((status = 200, body = PurchasesReport),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/reports/purchases")]
pub async fn purchases(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<WindowQuery>,
) -> Result<HttpResponse> {
    let report = windowed(&state, &caller, q, async |c, s| {
        reports::purchases(c, s).await
    })
    .await?;
    Ok(HttpResponse::Ok().json(report))
}

/// VAT by month (`YYYY-MM`, newest first): zero-rated and standard-rated
/// taxable amounts (`taxable_15` aliases `taxable_18`), VAT and grand total.
#[utoipa::path(tag = "reports", security(("bearer" = [])),
    params(WindowQuery),
    responses((status = 200, body = VatReport),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/reports/vat")]
pub async fn vat(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<WindowQuery>,
) -> Result<HttpResponse> {
    let report = windowed(&state, &caller, q, async |c, s| reports::vat(c, s).await).await?;
    Ok(HttpResponse::Ok().json(report))
}
