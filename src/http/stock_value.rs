//! `/reports/stock-valuation` and `/reports/margins`: what the stock is
//! worth at the end of a day, and the margin made over a window. Admins,
//! branch managers, inventory managers and auditors; everyone but an admin
//! its own branch. JSON, or CSV with `format=csv` (or `Accept: text/csv`).
//! Read from the read replica while it is within its lag bound.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::compliance::{csv_response, csv_wanted};
use crate::http::extract::Query;
use crate::state::AppState;
use domain::error::Problem;
use domain::reports::{self, grouping, MarginReport, Scope, StockValuation, DEFAULT_WINDOW_DAYS};
use domain::window::{day_of, DateWindow, Day};
use domain::{Action, Result};

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(valuation).service(margins);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ValuationQuery {
    /// The day whose end is valued (`YYYY-MM-DD`, organisation time zone);
    /// default today.
    #[param(value_type = Option<String>, format = Date)]
    pub as_of: Option<Day>,
    /// One branch (default: every branch for admins, the caller's own for
    /// anyone else, who gets 403 naming another).
    pub branch_id: Option<Uuid>,
    /// `medicine` (default) or `category`.
    #[param(schema_with = valuation_grouping)]
    pub group_by: Option<String>,
    /// `json` (default) or `csv` (the groups, one line each).
    #[param(value_type = Option<String>, pattern = "^\\s*(json|csv)?\\s*$")]
    pub format: Option<String>,
}

fn valuation_grouping() -> utoipa::openapi::schema::Schema {
    domain::input::one_of_or_blank_schema(&grouping::VALUATION)
}

fn margins_grouping() -> utoipa::openapi::schema::Schema {
    domain::input::one_of_or_blank_schema(&grouping::MARGINS)
}

/// Stock on hand at the end of `as_of` by medicine or category: base
/// units and value at batch cost from the movement ledger, with the
/// expired and quarantined parts apart.
#[utoipa::path(tag = "reports", security(("bearer" = [])),
    params(ValuationQuery),
    responses((status = 200, content((StockValuation = "application/json"), (String = "text/csv"))),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/reports/stock-valuation")]
pub async fn valuation(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    Query(q): Query<ValuationQuery>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadStockValue)?;
    let branch = caller.branch_filter(q.branch_id)?;
    let group = grouping::valuation(q.group_by.as_deref())?;
    let csv = csv_wanted(&req, q.format.as_deref())?;
    let day = day_of(q.as_of);
    let window = DateWindow::optional(day, day)?;
    let client = reports::connect(&state.reads()).await?;
    let day = window.or_last_days(&client, 1).await?;
    let report = reports::stock_valuation(&client, &day, branch, &group).await?;
    if csv {
        return csv_response("stock-valuation", &report.items);
    }
    Ok(HttpResponse::Ok().json(report))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MarginsQuery {
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
    /// `medicine` (default), `category` or `day`.
    #[param(schema_with = margins_grouping)]
    pub group_by: Option<String>,
    /// `json` (default) or `csv` (the groups, one line each).
    #[param(value_type = Option<String>, pattern = "^\\s*(json|csv)?\\s*$")]
    pub format: Option<String>,
}

/// Revenue net of VAT and credit notes, cost of goods sold at batch cost
/// (less what returns restocked), gross margin and margin percent, per
/// group, with totals.
#[utoipa::path(tag = "reports", security(("bearer" = [])),
    params(MarginsQuery),
    responses((status = 200, content((MarginReport = "application/json"), (String = "text/csv"))),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/reports/margins")]
pub async fn margins(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    Query(q): Query<MarginsQuery>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadStockValue)?;
    let branch = caller.branch_filter(q.branch_id)?;
    let group = grouping::margins(q.group_by.as_deref())?;
    let csv = csv_wanted(&req, q.format.as_deref())?;
    let window = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?;
    let client = reports::connect(&state.reads()).await?;
    let window = window.or_last_days(&client, DEFAULT_WINDOW_DAYS).await?;
    let scope = Scope {
        window: &window,
        branch,
    };
    let report = reports::margins(&client, &scope, &group).await?;
    if csv {
        return csv_response("margins", &report.items);
    }
    Ok(HttpResponse::Ok().json(report))
}
