//! Reports: sales, by pharmacist, inventory, purchases and VAT, with a
//! date range, and the stock value at a day's end and the margins, with
//! (for those who may see every branch) a branch picker. The same role and
//! branch rules as `/reports/*` (`Action::ReadReports`, or
//! `Action::ReadStockValue` for the last two; `branch_filter`), the same
//! domain reads, their rows in the order the API gives them; every table
//! downloads as CSV.

use actix_web::{web, HttpRequest};
use askama::Template;
use serde::Deserialize;

use super::table::{self, Cell, Table};
use super::{
    branch_options, html_status, optional_id, BranchOption, Chrome, Notice, Outcome, Staff,
};
use crate::state::AppState;
use domain::reports::{self, Scope, DEFAULT_WINDOW_DAYS};
use domain::window::{DateWindow, ReportWindow};
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/reports/{kind}", web::get().to(page));
}

/// The download switch of a page: `format=csv` and which `table`.
#[derive(Debug, Default, Deserialize)]
pub struct FormatQuery {
    pub format: Option<String>,
    pub table: Option<String>,
}

impl FormatQuery {
    pub fn wants_csv(&self) -> bool {
        self.format.as_deref().map(str::trim) == Some("csv")
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct ReportQuery {
    pub from_date: Option<String>,
    pub to_date: Option<String>,
    pub branch_id: Option<String>,
    pub format: Option<String>,
    pub table: Option<String>,
    /// The stock value's day.
    pub as_of: Option<String>,
}

/// The reports, in the order of the tabs: kind, title, link, who reads it.
const KINDS: [(&str, &str, &str, Action); 7] = [
    (
        "sales",
        "Sales",
        "/console/reports/sales",
        Action::ReadReports,
    ),
    (
        "pharmacists",
        "By pharmacist",
        "/console/reports/pharmacists",
        Action::ReadReports,
    ),
    (
        "inventory",
        "Inventory",
        "/console/reports/inventory",
        Action::ReadReports,
    ),
    (
        "purchases",
        "Purchases",
        "/console/reports/purchases",
        Action::ReadReports,
    ),
    ("vat", "VAT", "/console/reports/vat", Action::ReadReports),
    (
        "stock-value",
        "Stock value",
        "/console/reports/stock-value",
        Action::ReadStockValue,
    ),
    (
        "margins",
        "Margins",
        "/console/reports/margins",
        Action::ReadStockValue,
    ),
];

/// The first report tab `role` may read (the menu's link), if any.
pub fn first_tab(role: domain::Role) -> Option<&'static str> {
    KINDS
        .iter()
        .find(|(_, _, _, action)| action.permits(role))
        .map(|(_, _, href, _)| *href)
}

pub struct Tab {
    pub href: &'static str,
    pub label: &'static str,
    pub current: bool,
}

#[derive(Template)]
#[template(path = "console/report.html")]
struct ReportPage {
    chrome: Option<Chrome>,
    title: &'static str,
    tabs: Vec<Tab>,
    action: String,
    windowed: bool,
    from_date: String,
    to_date: String,
    branches: Vec<BranchOption>,
    /// The stock value's day field (`None` on the other reports).
    as_of: Option<String>,
    notice: Notice,
    summary: String,
    tables: Vec<Table>,
}

async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    staff: Staff,
    kind: web::Path<String>,
    q: web::Query<ReportQuery>,
) -> Outcome {
    let (kind, title, _, action) = KINDS
        .into_iter()
        .find(|(k, ..)| *k == kind.as_str())
        .ok_or_else(|| Error::not_found("There is no such report."))?;
    // As `/reports/*`: the role first, then the branch.
    staff.caller.require(action)?;
    let role = staff.role();
    let tabs = KINDS
        .iter()
        .filter(|(.., a)| a.permits(role))
        .map(|(k, label, href, _)| Tab {
            href,
            label,
            current: *k == kind,
        })
        .collect();
    let mut page = ReportPage {
        chrome: Some(Chrome::new(
            &staff,
            first_tab(staff.role()).unwrap_or_default(),
        )),
        title,
        tabs,
        action: format!("/console/reports/{kind}"),
        windowed: !matches!(kind, "inventory" | "stock-value"),
        as_of: (kind == "stock-value").then(|| q.as_of.clone().unwrap_or_default()),
        from_date: q.from_date.clone().unwrap_or_default(),
        to_date: q.to_date.clone().unwrap_or_default(),
        branches: Vec::new(),
        notice: Notice::default(),
        summary: String::new(),
        tables: Vec::new(),
    };
    let client = reports::connect(&state.reads()).await?;
    let built = build(&client, &staff, kind, &q).await;
    let requested = optional_id("branch_id", q.branch_id.as_deref()).unwrap_or(None);
    page.branches = branch_options(&client, &staff, requested).await?;
    match built {
        Ok((summary, window, tables)) => {
            if let Some(w) = window {
                page.from_date = w.from.to_string();
                page.to_date = w.to.to_string();
                if page.as_of.is_some() {
                    page.as_of = Some(w.to.to_string());
                }
            }
            let tables: Vec<Table> = tables
                .into_iter()
                .map(|t| t.with_csv(req.path(), req.query_string()))
                .collect();
            let format = FormatQuery {
                format: q.format.clone(),
                table: q.table.clone(),
            };
            if format.wants_csv() {
                return Ok(table::download(kind, &tables, format.table.as_deref())?);
            }
            page.summary = summary;
            page.tables = tables;
            html_status(actix_web::http::StatusCode::OK, &page)
        }
        // A refused filter is shown beside the filters, with the form kept.
        Err(e @ (Error::Validation { .. } | Error::Forbidden(_))) => {
            page.notice = Notice::from_error(&e);
            html_status(actix_web::ResponseError::status_code(&e), &page)
        }
        Err(e) => Err(e.into()),
    }
}

type Built = (String, Option<ReportWindow>, Vec<Table>);

async fn build(
    client: &deadpool_postgres::Object,
    staff: &Staff,
    kind: &str,
    q: &ReportQuery,
) -> Result<Built, Error> {
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch = staff.caller.branch_filter(requested)?;
    if kind == "stock-value" {
        return stock_value(client, branch, q.as_of.as_deref()).await;
    }
    let window = DateWindow::parse(q.from_date.as_deref(), q.to_date.as_deref())?
        .or_last_days(client, DEFAULT_WINDOW_DAYS)
        .await?;
    if kind == "inventory" {
        let scope = Scope {
            window: &window,
            branch,
        };
        let r = reports::inventory(client, &scope).await?;
        let mut totals = Table::new(
            "totals",
            "Stock now",
            &[
                "Medicines",
                "Low stock",
                "Out of stock",
                "Units",
                "Value at selling price",
            ],
        );
        totals.push(vec![
            Cell::count(r.total_medicines),
            Cell::count(r.low_stock_count),
            Cell::count(r.out_of_stock_count),
            Cell::count(r.total_units),
            Cell::amount(r.total_value),
        ]);
        let mut by_category = Table::new(
            "by_category",
            "Value by category",
            &["Category", "Medicines", "Units", "Value"],
        );
        for c in r.by_category {
            by_category.push(vec![
                Cell::text(c.name),
                Cell::count(c.medicine_count),
                Cell::count(c.units),
                Cell::amount(c.value),
            ]);
        }
        let mut low = Table::new(
            "low_stock",
            "The emptiest medicines",
            &["Medicine", "Category", "In stock", "Low-stock threshold"],
        )
        .with_note("The 20 medicines with the least stock, as the API lists them.");
        for m in r.low_stock_list {
            low.push(vec![
                Cell::text(m.name),
                Cell::text(m.category.unwrap_or_default()),
                Cell::count(m.stock_quantity),
                Cell::count(m.low_stock_threshold),
            ]);
        }
        return Ok((
            format!(
                "Stock as it is now; written off from {} to {}.",
                window.from, window.to
            ),
            Some(window),
            vec![totals, by_category, low],
        ));
    }
    let scope = Scope {
        window: &window,
        branch,
    };
    let summary = format!("From {} to {}.", window.from, window.to);
    let tables = match kind {
        "sales" => sales_tables(reports::sales(client, &scope).await?),
        "margins" => margin_tables(client, &scope).await?,
        "pharmacists" => {
            let r = reports::by_pharmacist(client, &scope).await?;
            let mut t = Table::new(
                "pharmacists",
                "Sales by pharmacist",
                &[
                    "Name",
                    "Role",
                    "Branch",
                    "Sales",
                    "Revenue",
                    "VAT",
                    "Average sale",
                ],
            )
            .with_note("Revenue descending.");
            for p in r.items {
                t.push(vec![
                    Cell::text(p.name),
                    Cell::text(p.role),
                    Cell::text(p.branch_name),
                    Cell::count(p.count),
                    Cell::amount(p.revenue),
                    Cell::amount(p.vat),
                    Cell::amount(p.average),
                ]);
            }
            vec![t]
        }
        "purchases" => {
            let r = reports::purchases(client, &scope).await?;
            let mut totals = Table::new("totals", "Totals", &["Batches", "Units", "Spend"]);
            totals.push(vec![
                Cell::count(r.totals.batch_count),
                Cell::count(r.totals.units),
                Cell::amount(r.totals.spend),
            ]);
            let mut by_supplier = Table::new(
                "by_supplier",
                "Spend by supplier",
                &["Supplier", "Batches", "Units", "Spend"],
            );
            for s in r.by_supplier {
                by_supplier.push(vec![
                    Cell::text(s.supplier_name.unwrap_or_else(|| "(none)".to_owned())),
                    Cell::count(s.batch_count),
                    Cell::count(s.units),
                    Cell::amount(s.spend),
                ]);
            }
            let mut by_medicine = Table::new(
                "by_medicine",
                "Top 20 medicines by spend",
                &["Medicine", "Batches", "Units", "Spend"],
            );
            for m in r.by_medicine {
                by_medicine.push(vec![
                    Cell::text(m.name),
                    Cell::count(m.batch_count),
                    Cell::count(m.units),
                    Cell::amount(m.spend),
                ]);
            }
            vec![totals, by_supplier, by_medicine]
        }
        _ => {
            let r = reports::vat(client, &scope).await?;
            let headers = [
                "Month",
                "Taxable at 0%",
                "Taxable at the standard rate",
                "VAT collected",
                "Grand total",
            ];
            let mut months = Table::new("by_month", "VAT by month", &headers)
                .with_note("Newest month first; taxable amounts are net of VAT.");
            let rows = r.by_month.iter().map(|m| (m.month.as_str(), &m.figures));
            for (month, f) in rows.chain(std::iter::once(("Total", &r.totals))) {
                months.push(vec![
                    Cell::text(month),
                    Cell::amount(f.taxable_0),
                    Cell::amount(f.taxable_18),
                    Cell::amount(f.vat_collected),
                    Cell::amount(f.grand_total),
                ]);
            }
            vec![months]
        }
    };
    Ok((summary, Some(window), tables))
}

fn sales_tables(r: reports::SalesReport) -> Vec<Table> {
    let mut totals = Table::new(
        "totals",
        "Totals",
        &["Sales", "Revenue", "VAT", "Subtotal", "Average sale"],
    );
    totals.push(vec![
        Cell::count(r.totals.count),
        Cell::amount(r.totals.revenue),
        Cell::amount(r.totals.vat),
        Cell::amount(r.totals.subtotal),
        Cell::amount(r.totals.average),
    ]);
    let mut by_day = Table::new("by_day", "Takings by day", &["Day", "Sales", "Total"])
        .with_note("Every day of the range, oldest first.");
    for d in r.by_day {
        by_day.push(vec![
            Cell::text(d.date.to_string()),
            Cell::count(d.count),
            Cell::amount(d.total),
        ]);
    }
    let mut by_payment = Table::new(
        "by_payment",
        "By payment method",
        &["Payment method", "Sales", "Total"],
    )
    .with_note("Highest total first.");
    for p in r.by_payment {
        by_payment.push(vec![
            Cell::text(p.payment_method),
            Cell::count(p.count),
            Cell::amount(p.total),
        ]);
    }
    let mut top = Table::new(
        "top_selling",
        "Top 10 medicines by revenue",
        &[
            "Medicine",
            "Quantity",
            "Revenue",
            "Cost",
            "Gross profit",
            "Margin",
        ],
    );
    for m in r.top_selling {
        top.push(vec![
            Cell::text(m.name),
            Cell::count(m.quantity),
            Cell::amount(m.revenue),
            Cell::amount(m.cost),
            Cell::amount(m.gross_profit),
            Cell::pct(m.margin_pct),
        ]);
    }
    let mut recent = Table::new(
        "recent_sales",
        "The 8 most recent sales",
        &["Invoice", "When", "Payment method", "Sold by", "Total"],
    );
    for s in r.recent_sales {
        recent.push(vec![
            Cell::text(s.invoice_number),
            Cell::text(super::when(s.created_at)),
            Cell::text(s.payment_method),
            Cell::text(s.pharmacist_name),
            Cell::amount(s.total),
        ]);
    }
    vec![totals, by_day, by_payment, top, recent]
}

/// The stock value at the end of `as_of` (default today), by medicine and
/// by category.
async fn stock_value(
    client: &deadpool_postgres::Object,
    branch: Option<uuid::Uuid>,
    as_of: Option<&str>,
) -> Result<Built, Error> {
    let day = DateWindow::parse(as_of, as_of)
        .map_err(|_| Error::validation("as_of", "`as_of` must be a date (YYYY-MM-DD)."))?
        .or_last_days(client, 1)
        .await?;
    let mut tables = Vec::new();
    for (group, title) in [("medicine", "By medicine"), ("category", "By category")] {
        let v = reports::stock_valuation(client, &day, branch, group).await?;
        if group == "medicine" {
            let mut totals = Table::new(
                "totals",
                "Stock value",
                &[
                    "Units",
                    "Value at cost",
                    "Expired",
                    "Quarantined or recalled",
                ],
            );
            totals.push(vec![
                Cell::count(v.total_quantity),
                Cell::amount(v.total_value),
                Cell::amount(v.expired_value),
                Cell::amount(v.quarantined_value),
            ]);
            tables.push(totals);
        }
        let mut t = Table::new(
            group,
            title,
            &[
                "Name",
                "Units",
                "Value",
                "Expired",
                "Quarantined or recalled",
            ],
        )
        .with_note("Highest value first.");
        for r in v.items {
            t.push(vec![
                Cell::text(r.name),
                Cell::count(r.quantity),
                Cell::amount(r.value),
                Cell::amount(r.expired_value),
                Cell::amount(r.quarantined_value),
            ]);
        }
        tables.push(t);
    }
    Ok((
        format!("Stock at batch cost at the end of {}.", day.to),
        Some(day),
        tables,
    ))
}

/// The margins of the window, by medicine and by category, with totals.
async fn margin_tables(
    client: &deadpool_postgres::Object,
    scope: &Scope<'_>,
) -> Result<Vec<Table>, Error> {
    let headers = [
        "Name",
        "Revenue",
        "Cost of goods sold",
        "Gross margin",
        "Margin",
    ];
    let mut tables = Vec::new();
    for (group, title) in [("medicine", "By medicine"), ("category", "By category")] {
        let m = reports::margins(client, scope, group).await?;
        let mut t = Table::new(group, title, &headers)
            .with_note("Revenue net of VAT and credit notes; highest revenue first.");
        let rows = m
            .items
            .into_iter()
            .chain(std::iter::once(reports::MarginRow {
                name: "Total".to_owned(),
                ..m.totals
            }));
        for r in rows {
            t.push(vec![
                Cell::text(r.name),
                Cell::amount(r.revenue),
                Cell::amount(r.cost_of_goods_sold),
                Cell::amount(r.gross_margin),
                Cell::pct(r.margin_pct),
            ]);
        }
        tables.push(t);
    }
    Ok(tables)
}
