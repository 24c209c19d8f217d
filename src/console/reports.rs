//! Reports: sales, by pharmacist, inventory, purchases and VAT, with a
//! date range and (for those who may see every branch) a branch picker.
//! The same role and branch rules as `/reports/*` (`Action::ReadReports`,
//! `branch_filter`), the same domain reads, their rows in the order the API
//! gives them; every table downloads as CSV.

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
}

/// The five reports, in the order of the tabs.
const KINDS: [(&str, &str); 5] = [
    ("sales", "Sales"),
    ("pharmacists", "By pharmacist"),
    ("inventory", "Inventory"),
    ("purchases", "Purchases"),
    ("vat", "VAT"),
];

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
    let (kind, title) = KINDS
        .into_iter()
        .find(|(k, _)| *k == kind.as_str())
        .ok_or_else(|| Error::not_found("There is no such report."))?;
    // As `/reports/*`: the role first, then the branch.
    staff.caller.require(Action::ReadReports)?;
    let tabs = KINDS
        .iter()
        .map(|(k, label)| Tab {
            href: match *k {
                "sales" => "/console/reports/sales",
                "pharmacists" => "/console/reports/pharmacists",
                "inventory" => "/console/reports/inventory",
                "purchases" => "/console/reports/purchases",
                _ => "/console/reports/vat",
            },
            label,
            current: *k == kind,
        })
        .collect();
    let mut page = ReportPage {
        chrome: Some(Chrome::new(&staff, "/console/reports/sales")),
        title,
        tabs,
        action: format!("/console/reports/{kind}"),
        windowed: kind != "inventory",
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
