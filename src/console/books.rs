//! The books an inspector reads: the prescription book, the
//! classified-drugs register and the destruction register, paged (50 rows),
//! filterable by date and (for those who may see every branch) by branch,
//! with the retention notes and a CSV export of every row of the range, as
//! `/compliance/*` answers them.

use actix_web::{web, HttpRequest};
use askama::Template;
use serde::Deserialize;

use super::reports::Tab;
use super::table::{self, Cell, Table};
use super::{
    branch_options, html_status, optional_id, when, BranchOption, Chrome, Notice, Outcome, Staff,
};
use crate::state::AppState;
use domain::books::{self, Scope};
use domain::paging::{Page, PageParams};
use domain::window::{DateWindow, MAX_WINDOW_DAYS};
use domain::write_offs;
use domain::Error;

/// Rows per page, as the API's books.
const PAGE_SIZE: i64 = 50;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/books/{book}", web::get().to(page));
}

#[derive(Debug, Default, Deserialize)]
pub struct BookQuery {
    pub from_date: Option<String>,
    pub to_date: Option<String>,
    pub branch_id: Option<String>,
    pub page: Option<i64>,
    pub format: Option<String>,
}

#[derive(Template)]
#[template(path = "console/book.html")]
struct BookPage {
    chrome: Option<Chrome>,
    title: &'static str,
    tabs: Vec<Tab>,
    action: String,
    from_date: String,
    to_date: String,
    branches: Vec<BranchOption>,
    notice: Notice,
    retention_note: &'static str,
    table: Table,
    total: i64,
    page: i64,
    pages: i64,
    prev_href: String,
    next_href: String,
}

/// The link to page `n` with the page's filters kept.
fn page_href(req: &HttpRequest, n: i64) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(req.query_string().as_bytes()) {
        if k != "page" && k != "format" {
            q.append_pair(&k, &v);
        }
    }
    q.append_pair("page", &n.to_string());
    format!("{}?{}", req.path(), q.finish())
}

async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    staff: Staff,
    book: web::Path<String>,
    q: web::Query<BookQuery>,
) -> Outcome {
    let (book, title, note) = match book.as_str() {
        "prescriptions" => (
            "prescriptions",
            "Prescription book",
            books::PRESCRIPTION_BOOK_NOTE,
        ),
        "classified" => (
            "classified",
            "Classified-drugs register",
            books::CLASSIFIED_BOOK_NOTE,
        ),
        "destruction" => (
            "destruction",
            "Destruction register",
            books::DESTRUCTION_REGISTER_NOTE,
        ),
        _ => return Err(Error::not_found("There is no such book.").into()),
    };
    let tabs = vec![
        Tab {
            href: "/console/books/prescriptions",
            label: "Prescription book",
            current: book == "prescriptions",
        },
        Tab {
            href: "/console/books/classified",
            label: "Classified-drugs register",
            current: book == "classified",
        },
        Tab {
            href: "/console/books/destruction",
            label: "Destruction register",
            current: book == "destruction",
        },
    ];
    let csv = q.format.as_deref().map(str::trim) == Some("csv");
    let client = books::connect(&state.reads()).await?;
    let requested = optional_id("branch_id", q.branch_id.as_deref()).unwrap_or(None);
    let mut view = BookPage {
        chrome: Some(Chrome::new(&staff, "/console/books/prescriptions")),
        title,
        tabs,
        action: format!("/console/books/{book}"),
        from_date: q.from_date.clone().unwrap_or_default(),
        to_date: q.to_date.clone().unwrap_or_default(),
        branches: branch_options(&client, &staff, requested).await?,
        notice: Notice::default(),
        retention_note: note,
        table: Table::new("rows", title, &[]),
        total: 0,
        page: 1,
        pages: 1,
        prev_href: String::new(),
        next_href: String::new(),
    };
    let read = async {
        let paging = PageParams {
            page: q.page,
            page_size: Some(PAGE_SIZE),
        }
        .resolve(PAGE_SIZE)?;
        let window = DateWindow::parse(q.from_date.as_deref(), q.to_date.as_deref())?;
        let requested = optional_id("branch_id", q.branch_id.as_deref())?;
        let branch_id = staff.caller.branch_filter(requested)?;
        // An export is every row of a closed window of at most a year, as
        // the API's; a page is bounded by its size.
        let bounds = if csv {
            let w = window.or_last_days(&client, MAX_WINDOW_DAYS).await?;
            (Some(w.start), Some(w.end))
        } else {
            window.bounds(&client).await?
        };
        let scope = Scope { branch_id, bounds };
        let limits = (!csv).then_some((paging.offset(), paging.limit()));
        let (table, total) = match book {
            "prescriptions" => prescriptions(&client, scope, limits).await?,
            "classified" => classified(&client, scope, limits).await?,
            _ => destruction(&client, scope, limits).await?,
        };
        Ok::<(Table, i64, Page), Error>((table, total, paging))
    };
    match read.await {
        Ok((table, total, paging)) => {
            if csv {
                let name = match book {
                    "prescriptions" => "prescription-book",
                    "classified" => "classified-drugs-book",
                    _ => "destruction-register",
                };
                return Ok(table::download(name, &[table], None)?);
            }
            view.table = table.with_csv(req.path(), req.query_string());
            view.total = total;
            view.page = paging.page;
            view.pages = ((total + PAGE_SIZE - 1) / PAGE_SIZE).max(1);
            if view.page > 1 {
                view.prev_href = page_href(&req, view.page - 1);
            }
            if view.page < view.pages {
                view.next_href = page_href(&req, view.page + 1);
            }
            html_status(actix_web::http::StatusCode::OK, &view)
        }
        Err(e @ (Error::Validation { .. } | Error::Forbidden(_))) => {
            view.notice = Notice::from_error(&e);
            html_status(actix_web::ResponseError::status_code(&e), &view)
        }
        Err(e) => Err(e.into()),
    }
}

async fn prescriptions(
    client: &deadpool_postgres::Object,
    scope: Scope,
    limits: books::Paging,
) -> Result<(Table, i64), Error> {
    let (rows, total) = books::prescription_book(client, scope, limits).await?;
    let mut t = Table::new(
        "prescriptions",
        "Prescription book",
        &[
            "Rx number",
            "Created",
            "Patient",
            "Patient id",
            "Prescriber",
            "Licence",
            "Status",
            "Lines",
            "Created by",
            "Dispensed",
        ],
    )
    .with_note("Newest first; deleted prescriptions never appear.");
    for r in rows {
        t.push(vec![
            Cell::text(r.rx_number),
            Cell::text(when(r.created_at)),
            Cell::text(r.patient_name),
            Cell::text(r.patient_id_number),
            Cell::text(r.prescriber_name),
            Cell::text(r.prescriber_license),
            Cell::text(r.status),
            Cell::count(r.line_count),
            Cell::text(r.created_by_name),
            Cell::text(r.dispensed_at.map(when).unwrap_or_default()),
        ]);
    }
    Ok((t, total))
}

async fn classified(
    client: &deadpool_postgres::Object,
    scope: Scope,
    limits: books::Paging,
) -> Result<(Table, i64), Error> {
    let (rows, total) = books::classified_book(client, scope, limits).await?;
    let mut t = Table::new(
        "classified",
        "Classified-drugs register",
        &[
            "Dispensed",
            "Medicine",
            "Schedule",
            "Quantity",
            "Patient national id",
            "Doctor licence",
            "Dispensed by",
            "Invoice",
        ],
    )
    .with_note("Newest first.");
    for r in rows {
        t.push(vec![
            Cell::text(when(r.dispensed_at)),
            Cell::text(r.medicine_name),
            Cell::text(r.control_schedule),
            Cell::count(r.quantity),
            Cell::text(r.patient_national_id),
            Cell::text(r.doctor_license),
            Cell::text(r.dispensed_by_name),
            Cell::text(r.invoice_number),
        ]);
    }
    Ok((t, total))
}

async fn destruction(
    client: &deadpool_postgres::Object,
    scope: Scope,
    limits: books::Paging,
) -> Result<(Table, i64), Error> {
    let (rows, total) = write_offs::destruction_register(client, scope, limits).await?;
    let mut t = Table::new(
        "destruction",
        "Destruction register",
        &[
            "Written off",
            "Medicine",
            "Schedule",
            "Batch",
            "Quantity",
            "Reason",
            "Witness",
            "Witness given as",
            "Written off by",
        ],
    )
    .with_note("Newest first; every write-off line of a controlled medicine.");
    for r in rows {
        t.push(vec![
            Cell::text(when(r.written_off_at)),
            Cell::text(r.medicine_name),
            Cell::text(r.control_schedule),
            Cell::text(r.batch_number),
            Cell::count(r.quantity),
            Cell::text(r.reason),
            Cell::text(r.witness_name),
            Cell::text(match r.witness_kind.as_str() {
                "user" => "user account",
                _ => "typed name",
            }),
            Cell::text(r.written_off_by_name),
        ]);
    }
    Ok((t, total))
}
