//! The dashboard: today's figures against yesterday, the 30-day revenue
//! chart, the branch comparison and the stock and expiry counts, each
//! linking to its list. The figures are the ones `GET /dashboard/summary`
//! and `GET /dashboard/branch-comparison` answer for the same caller.

use actix_web::{web, HttpRequest};
use askama::Template;
use chrono::Duration;
use rust_decimal::Decimal;
use serde::Deserialize;

use super::table::{Cell, Table};
use super::{
    branch_options, charts, html, money, optional_id, BranchOption, Chrome, Outcome, Staff,
};
use crate::state::AppState;
use domain::dashboard::{self, Alert, SPARKLINE_DAYS};
use domain::reports::DEFAULT_WINDOW_DAYS;
use domain::window::DateWindow;
use domain::{settings, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/dashboard", web::get().to(page))
        .route("/dashboard/alerts/{kind}", web::get().to(alerts));
}

#[derive(Debug, Default, Deserialize)]
pub struct BranchQuery {
    pub branch_id: Option<String>,
}

/// One count of the dashboard with the list it links to.
pub struct Count {
    pub label: &'static str,
    pub value: i64,
    pub href: String,
    pub id: &'static str,
}

#[derive(Template)]
#[template(path = "console/dashboard.html")]
struct DashboardPage {
    chrome: Option<Chrome>,
    branches: Vec<BranchOption>,
    scope_label: String,
    currency: String,
    date: String,
    sales_count: i64,
    revenue: String,
    vat: String,
    trend: String,
    revenue_chart: String,
    days: Table,
    comparison_chart: String,
    comparison_window: String,
    comparison: Table,
    counts: Vec<Count>,
    /// For those who follow the fiscal queue: the age of the oldest
    /// document the authority has not finished, over the branches shown.
    fiscal_oldest: Option<String>,
}

/// The day's revenue against yesterday's, in words (an arrow and a word,
/// never colour alone).
fn trend_words(pct: Decimal, yesterday: Decimal) -> String {
    let pct = pct.round_dp(1);
    if yesterday.is_zero() {
        "no takings yesterday to compare with".to_owned()
    } else if pct > Decimal::ZERO {
        format!("▲ up {}% on yesterday", pct.normalize())
    } else if pct < Decimal::ZERO {
        format!("▼ down {}% on yesterday", (-pct).normalize())
    } else {
        "● level with yesterday".to_owned()
    }
}

async fn page(state: web::Data<AppState>, staff: Staff, q: web::Query<BranchQuery>) -> Outcome {
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch = staff.caller.branch_filter(requested)?;
    let client = dashboard::connect(&state.reads()).await?;
    let days = DateWindow::optional(None, None)?
        .or_last_days(&client, SPARKLINE_DAYS)
        .await?;
    let worth = domain::Action::ReadStockValue.permits(staff.caller.role);
    let summary = dashboard::summary(&client, branch, &days, worth).await?;
    let window = DateWindow::optional(None, None)?
        .or_last_days(&client, DEFAULT_WINDOW_DAYS)
        .await?;
    // As `GET /dashboard/branch-comparison`: the chain for those who may
    // see every branch, the caller's own branch for everyone else.
    let compared =
        dashboard::branch_comparison(&client, &window, staff.caller.branch_filter(None)?).await?;
    let currency = settings::read(&client, staff.caller.org_id)
        .await?
        .base_currency;
    let series: Vec<_> = summary
        .sparkline_30d
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let back = SPARKLINE_DAYS - 1 - i as i64;
            (summary.date - Duration::days(back), *v)
        })
        .collect();
    let mut day_table = Table::new("days", "Revenue per day", &["Day", "Revenue"]);
    for (d, v) in series.iter().rev() {
        day_table.push(vec![Cell::text(d.to_string()), Cell::amount(*v)]);
    }
    let shares: Vec<charts::Share<'_>> = compared
        .iter()
        .map(|b| charts::Share {
            label: &b.branch_name,
            revenue: b.revenue,
            share_pct: b.share_pct,
            sales: b.sales_count,
        })
        .collect();
    let comparison_chart = charts::branch_shares(&shares, &currency);
    let mut comparison = Table::new(
        "comparison",
        "Branch comparison",
        &["Branch", "Code", "Sales", "Revenue", "Share of revenue"],
    )
    .with_note("Revenue descending, ties by name.");
    for b in &compared {
        comparison.push(vec![
            Cell::text(b.branch_name.clone()),
            Cell::text(b.branch_code.clone()),
            Cell::count(b.sales_count),
            Cell::amount(b.revenue),
            Cell::pct(b.share_pct),
        ]);
    }
    let branch_param = branch
        .map(|b| format!("?branch_id={b}"))
        .unwrap_or_default();
    let link = |a: Alert| format!("/console/dashboard/alerts/{}{branch_param}", a.as_str());
    let counts = vec![
        Count {
            label: "Low stock",
            value: summary.low_stock_count,
            href: link(Alert::LowStock),
            id: "count-low-stock",
        },
        Count {
            label: "Out of stock",
            value: summary.out_of_stock_count,
            href: link(Alert::OutOfStock),
            id: "count-out-of-stock",
        },
        Count {
            label: "Expiring within 30 days",
            value: summary.expiring_30_count,
            href: link(Alert::Expiring30),
            id: "count-expiring-30",
        },
        Count {
            label: "Expiring within 90 days",
            value: summary.expiring_90_count,
            href: link(Alert::Expiring90),
            id: "count-expiring-90",
        },
        Count {
            label: "Expired",
            value: summary.expired_count,
            href: link(Alert::Expired),
            id: "count-expired",
        },
    ];
    let fiscal_oldest = if domain::Action::ReadFiscalDocuments.permits(staff.caller.role) {
        let rows = domain::fiscal::read::summary(&client, branch).await?;
        Some(
            rows.iter()
                .filter_map(|r| r.oldest_unfinished_seconds)
                .max()
                .map_or_else(|| "nothing unfinished".to_owned(), super::fiscal::age),
        )
    } else {
        None
    };
    let scope_label = scope_label(&client, &staff, branch).await?;
    html(&DashboardPage {
        chrome: Some(Chrome::new(&staff, "/console/dashboard")),
        branches: branch_options(&client, &staff, branch).await?,
        scope_label,
        date: summary.date.to_string(),
        sales_count: summary.today_sales_count,
        revenue: money(summary.today_revenue),
        vat: money(summary.today_vat),
        trend: trend_words(
            summary.revenue_trend,
            series
                .iter()
                .rev()
                .nth(1)
                .map_or(Decimal::ZERO, |(_, v)| *v),
        ),
        revenue_chart: charts::daily_revenue(&series, &currency),
        days: day_table,
        comparison_chart,
        comparison_window: format!("{} to {}", window.from, window.to),
        comparison,
        counts,
        fiscal_oldest,
        currency,
    })
}

/// "All branches" or the branch's name.
async fn scope_label<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    staff: &Staff,
    branch: Option<uuid::Uuid>,
) -> Result<String, Error> {
    let Some(id) = branch else {
        return Ok("All branches".to_owned());
    };
    let name = domain::branches::get(c, id)
        .await?
        .filter(|b| staff.caller.can_see_branch(b.id))
        .map(|b| format!("{} ({})", b.name, b.code));
    name.ok_or_else(|| Error::validation("branch_id", "There is no such branch."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trend_is_told_in_words() {
        let d = |n: i64| Decimal::new(n, 0);
        assert_eq!(trend_words(d(25), d(100)), "▲ up 25% on yesterday");
        assert_eq!(trend_words(d(-100), d(100)), "▼ down 100% on yesterday");
        assert_eq!(trend_words(d(0), d(100)), "● level with yesterday");
        assert_eq!(
            trend_words(d(0), d(0)),
            "no takings yesterday to compare with"
        );
    }
}

#[derive(Template)]
#[template(path = "console/alerts.html")]
struct AlertsPage {
    chrome: Option<Chrome>,
    title: String,
    scope_label: String,
    table: Table,
}

async fn alerts(
    req: HttpRequest,
    state: web::Data<AppState>,
    staff: Staff,
    kind: web::Path<String>,
    q: web::Query<BranchQuery>,
) -> Outcome {
    let alert = Alert::parse(&kind)
        .ok_or_else(|| Error::not_found("There is no such list on the dashboard."))?;
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch = staff.caller.branch_filter(requested)?;
    let client = dashboard::connect(&state.reads()).await?;
    let today = DateWindow::optional(None, None)?
        .or_last_days(&client, 1)
        .await?
        .to;
    let rows = dashboard::alert_list(&client, branch, today, alert).await?;
    let title = match alert {
        Alert::LowStock => "Low stock",
        Alert::OutOfStock => "Out of stock",
        Alert::Expiring30 => "Expiring within 30 days",
        Alert::Expiring90 => "Expiring within 90 days",
        Alert::Expired => "Expired stock",
    };
    let mut table = if alert.is_stock() {
        Table::new(
            "items",
            title,
            &["Medicine", "In stock", "Low-stock threshold"],
        )
        .with_note("Emptiest first.")
    } else {
        Table::new(
            "items",
            title,
            &[
                "Medicine",
                "Batch",
                "Branch",
                "Expiry date",
                "Quantity left",
            ],
        )
        .with_note("Soonest expiry first.")
    };
    for r in rows {
        if alert.is_stock() {
            table.push(vec![
                Cell::text(r.medicine_name),
                Cell::count(r.quantity),
                Cell::count(r.low_stock_threshold.unwrap_or_default()),
            ]);
        } else {
            table.push(vec![
                Cell::text(r.medicine_name),
                Cell::text(r.batch_number.unwrap_or_default()),
                Cell::text(r.branch_code.unwrap_or_default()),
                Cell::text(r.expiry_date.map(|d| d.to_string()).unwrap_or_default()),
                Cell::count(r.quantity),
            ]);
        }
    }
    let table = table.with_csv(req.path(), req.query_string());
    if web::Query::<super::reports::FormatQuery>::from_query(req.query_string())
        .is_ok_and(|f| f.wants_csv())
    {
        return Ok(super::table::download(alert.as_str(), &[table], None)?);
    }
    html(&AlertsPage {
        chrome: Some(Chrome::new(&staff, "/console/dashboard")),
        title: title.to_owned(),
        scope_label: scope_label(&client, &staff, branch).await?,
        table,
    })
}
