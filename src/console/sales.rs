//! Sales and returns: a day's sales of a branch with a lookup by invoice
//! number, a sale's page (its lines, what the tax authority made of its
//! invoice, FDN and QR payload, its returns) with the return form, and the
//! credit notes. Reads call the domain functions of `GET /sales`,
//! `GET /sales/{id}` and `GET /returns`; a return is the branch actor's
//! `CreateReturn`, exactly as `POST /sales/{id}/returns` files it, so a
//! cashier's return waits for a manager here too.
//!
//! Over 600 lines: the sales list, the sale page and its return form share
//! the row types and the refusal handling, kept together.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{self, base_of, Choice, Pager};
use super::{
    branch_options, html_status, money, optional_id, see_other, when, BranchOption, Chrome, Notice,
    Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::input::{path_id, Flag};
use domain::paging::PageParams;
use domain::returns::{self, CreditNote, ReturnLineRequest, ReturnRequest};
use domain::sales::{self, Sale};
use domain::window::{strict_day, DateWindow};
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/sales", web::get().to(sales_page))
        .route("/sales/{id}", web::get().to(sale_page))
        .route("/sales/{id}/returns", web::post().to(file_return))
        .route("/returns", web::get().to(returns_page));
}

const PAGE_SIZE: i64 = 50;

/// A day field: blank is today (in the organisation's zone).
fn day_field(field: &str, v: Option<&str>) -> Result<Option<chrono::NaiveDate>, Error> {
    match v.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => strict_day(s)
            .map(Some)
            .ok_or_else(|| Error::validation(field, "Enter a date as YYYY-MM-DD.")),
    }
}

pub struct SaleRow {
    pub id: String,
    pub invoice: String,
    pub at: String,
    pub by: String,
    pub method: String,
    pub lines: usize,
    pub total: String,
    pub status: String,
}

fn sale_row(s: &Sale) -> SaleRow {
    SaleRow {
        id: s.id.to_string(),
        invoice: s.invoice_number.clone(),
        at: when(s.created_at),
        by: s.created_by_name.clone(),
        method: method_label(&s.payment_method).to_owned(),
        lines: s.items.len(),
        total: money(s.total),
        status: s.status.clone(),
    }
}

fn method_label(m: &str) -> &str {
    match m {
        "cash" => "Cash",
        "card" => "Card",
        "mobile_money" => "Mobile money",
        "credit" => "On account",
        other => other,
    }
}

#[derive(Template)]
#[template(path = "console/sales.html")]
struct SalesPage {
    chrome: Option<Chrome>,
    notice: Notice,
    day: String,
    invoice: String,
    branches: Vec<BranchOption>,
    rows: Vec<SaleRow>,
    day_total: String,
    pager: Pager,
}

#[derive(Debug, Default, Deserialize)]
pub struct SalesQuery {
    pub day: Option<String>,
    pub invoice: Option<String>,
    pub branch_id: Option<String>,
    pub page: Option<i64>,
}

async fn sales_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<SalesQuery>,
) -> Outcome {
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch_id = staff.caller.branch_filter(requested)?;
    let client = state.pool.get().await?;
    let invoice = q.invoice.clone().unwrap_or_default().trim().to_owned();
    let mut notice = Notice::default();
    if !invoice.is_empty() {
        match sales::by_invoice_number(&client, &invoice, branch_id).await? {
            Some(s) if staff.caller.can_see_branch(s.branch_id) => {
                return Ok(see_other(&format!("/console/sales/{}", s.id)));
            }
            // Another branch's number reads as no number at all.
            _ => {
                notice = Notice::from_error(&Error::validation(
                    "invoice",
                    format!("No sale of yours has the invoice number {invoice}."),
                ));
            }
        }
    }
    let day = match day_field("day", q.day.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            notice = Notice::from_error(&e);
            None
        }
    };
    let window = DateWindow::optional(day, day)?
        .or_last_days(&client, 1)
        .await?;
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let filter = sales::ListFilter {
        branch_id,
        from: Some(window.start),
        until: Some(window.end),
    };
    let (items, total) = sales::list(&client, &filter, page.offset(), page.limit()).await?;
    let day_total: Decimal = items.iter().map(|s| s.total).sum();
    let day_text = window.from.to_string();
    let branch_text = requested.map(|b| b.to_string()).unwrap_or_default();
    let base = base_of(
        "/console/sales",
        &[
            ("day", day_text.as_str()),
            ("branch_id", branch_text.as_str()),
        ],
    );
    html_status(
        StatusCode::OK,
        &SalesPage {
            chrome: Some(Chrome::new(&staff, "/console/sales")),
            notice,
            day: day_text,
            invoice,
            branches: branch_options(&client, &staff, requested).await?,
            rows: items.iter().map(sale_row).collect(),
            day_total: money(day_total),
            pager: Pager::new(&base, page, total),
        },
    )
}

pub struct LineRow {
    pub id: String,
    pub medicine: String,
    pub quantity: i32,
    pub pack: String,
    pub unit_price: String,
    pub discount: String,
    pub vat: String,
    pub total: String,
    /// What may still be returned of it.
    pub returnable: i32,
}

pub struct NoteRow {
    pub number: String,
    pub status: String,
    pub at: String,
    pub by: String,
    pub method: String,
    pub total: String,
    pub reason: String,
    pub lines: String,
}

fn note_row(n: &CreditNote) -> NoteRow {
    NoteRow {
        number: n
            .credit_note_number
            .clone()
            .unwrap_or_else(|| "(not issued)".to_owned()),
        status: match n.status.as_str() {
            "pending_approval" => "waiting for a manager's approval".to_owned(),
            other => other.to_owned(),
        },
        at: when(n.created_at),
        by: n.created_by_name.clone(),
        method: method_label(&n.refund_method).to_owned(),
        total: money(n.total),
        reason: n.reason.clone(),
        lines: n
            .items
            .iter()
            .map(|i| format!("{} × {}", i.quantity, i.medicine_name))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[derive(Template)]
#[template(path = "console/sale.html")]
struct SalePage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    sale_id: String,
    invoice: String,
    at: String,
    by: String,
    method: String,
    subtotal: String,
    vat: String,
    discount: String,
    total: String,
    fiscal_status: String,
    fdn: String,
    verification_code: String,
    qr: String,
    fiscal_error: String,
    simulated: bool,
    lines: Vec<LineRow>,
    notes: Vec<NoteRow>,
    can_return: bool,
    issues_at_once: bool,
    methods: Vec<Choice>,
    reason: String,
    restock: bool,
    mutation_id: String,
}

/// The sale `raw` names when the caller may see it (404 otherwise, as
/// `GET /sales/{id}`).
async fn visible_sale(state: &AppState, staff: &Staff, raw: &str) -> Result<Sale, Error> {
    let id = path_id(raw, "Sale")?;
    let client = state.pool.get().await?;
    sales::get_shown(&client, id)
        .await?
        .filter(|s| staff.caller.can_see_branch(s.branch_id))
        .ok_or_else(|| Error::not_found("Sale not found"))
}

#[derive(Debug, Default, Deserialize)]
pub struct SaleQuery {
    pub done: Option<String>,
}

async fn show_sale(
    state: &AppState,
    staff: &Staff,
    sale: Sale,
    notice: Notice,
    sent: Option<&ReturnForm>,
    code: StatusCode,
) -> Outcome {
    let client = state.pool.get().await?;
    let filter = returns::ListFilter {
        sale_id: Some(sale.id),
        ..Default::default()
    };
    let (notes, _) = returns::list(&client, &filter, None).await?;
    // Units of each line held by issued and pending returns.
    let mut held: std::collections::HashMap<Uuid, i32> = std::collections::HashMap::new();
    for n in notes.iter().filter(|n| n.status != "rejected") {
        for i in &n.items {
            *held.entry(i.sale_item_id).or_default() += i.quantity;
        }
    }
    let lines = sale
        .items
        .iter()
        .map(|i| LineRow {
            id: i.id.to_string(),
            medicine: i.medicine_name.clone(),
            quantity: i.quantity,
            pack: if i.pack_id.is_some() {
                format!("pack of {}", i.pack_units)
            } else {
                "unit".to_owned()
            },
            unit_price: money(i.unit_price),
            discount: money(i.discount),
            vat: format!("{}% ({})", i.vat_rate, money(i.vat_amount)),
            total: money(i.line_total),
            returnable: (i.quantity - held.get(&i.id).copied().unwrap_or_default()).max(0),
        })
        .collect();
    let fiscal = sale.fiscal.clone();
    let chosen = sent
        .map(|f| f.refund_method.clone())
        .unwrap_or_else(|| sale.payment_method.clone());
    let methods = ["cash", "card", "mobile_money", "credit"]
        .into_iter()
        .map(|m| Choice::new(m, method_label(m), &chosen))
        .collect();
    html_status(
        code,
        &SalePage {
            chrome: Some(Chrome::new(staff, "/console/sales")),
            csrf: staff.csrf.clone(),
            notice,
            sale_id: sale.id.to_string(),
            invoice: sale.invoice_number.clone(),
            at: when(sale.created_at),
            by: sale.created_by_name.clone(),
            method: method_label(&sale.payment_method).to_owned(),
            subtotal: money(sale.subtotal),
            vat: money(sale.vat),
            discount: money(sale.discount),
            total: money(sale.total),
            fiscal_status: fiscal.as_ref().map_or_else(
                || "not sent (made before fiscalisation)".to_owned(),
                |f| f.status.clone(),
            ),
            fdn: fiscal
                .as_ref()
                .and_then(|f| f.fdn.clone())
                .unwrap_or_default(),
            verification_code: fiscal
                .as_ref()
                .and_then(|f| f.verification_code.clone())
                .unwrap_or_default(),
            qr: fiscal
                .as_ref()
                .and_then(|f| f.qr_code.clone())
                .unwrap_or_default(),
            fiscal_error: fiscal
                .as_ref()
                .and_then(|f| f.last_error.clone())
                .unwrap_or_default(),
            simulated: fiscal.as_ref().is_some_and(|f| f.simulated),
            lines,
            notes: notes.iter().map(note_row).collect(),
            can_return: Action::ReturnSale.permits(staff.role()),
            issues_at_once: Action::IssueCreditNote.permits(staff.role()),
            methods,
            reason: sent.map(|f| f.reason.clone()).unwrap_or_default(),
            restock: sent.is_none_or(|f| f.restock.is_some()),
            mutation_id: Uuid::now_v7().to_string(),
        },
    )
}

async fn sale_page(
    state: web::Data<AppState>,
    staff: Staff,
    id: web::Path<String>,
    q: web::Query<SaleQuery>,
) -> Outcome {
    let sale = visible_sale(&state, &staff, &id).await?;
    let notice = match q.done.as_deref() {
        Some("issued") => Notice::done("The return was made and its credit note issued."),
        Some("pending") => Notice::done(
            "The return was filed; it waits for a manager's approval before anything is refunded.",
        ),
        _ => Notice::default(),
    };
    show_sale(&state, &staff, sale, notice, None, StatusCode::OK).await
}

/// The return form: `qty-<sale item id>` per line, and the rest.
#[derive(Debug, Default, Clone)]
pub struct ReturnForm {
    pub lines: Vec<(Uuid, String)>,
    pub reason: String,
    pub refund_method: String,
    pub restock: Option<String>,
    pub mutation_id: String,
}

impl ReturnForm {
    fn of(pairs: Vec<(String, String)>) -> ReturnForm {
        let mut f = ReturnForm::default();
        for (k, v) in pairs {
            match k.as_str() {
                "reason" => f.reason = v,
                "refund_method" => f.refund_method = v,
                "restock" => f.restock = Some(v),
                "client_mutation_id" => f.mutation_id = v,
                other => {
                    if let Some(id) = forms::row_id(other, "qty") {
                        f.lines.push((id, v));
                    }
                }
            }
        }
        f
    }

    /// The API's body: the lines with a quantity, blank lines left out.
    fn request(&self) -> Result<ReturnRequest, Error> {
        let mut items = Vec::new();
        for (id, v) in &self.lines {
            let v = v.trim();
            if v.is_empty() || v == "0" {
                continue;
            }
            let quantity = v.parse::<Decimal>().map_err(|_| {
                Error::validation(
                    "items",
                    format!("{v} is not a quantity: enter whole units."),
                )
            })?;
            items.push(ReturnLineRequest {
                sale_item_id: *id,
                quantity,
            });
        }
        if items.is_empty() {
            return Err(Error::validation(
                "items",
                "Enter how many of at least one line come back.",
            ));
        }
        Ok(ReturnRequest {
            items,
            reason: Some(self.reason.clone()),
            refund_method: Some(self.refund_method.clone()).filter(|m| !m.is_empty()),
            restock: Some(Flag(self.restock.is_some())),
            client_mutation_id: Some(self.mutation_id.clone()).filter(|m| !m.is_empty()),
        })
    }
}

async fn file_return(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ReturnSale)?;
    let sale = visible_sale(&state, &staff, &id).await?;
    let form = ReturnForm::of(form);
    let attempt = async {
        let r = form.request()?.validate(
            sale.id,
            sale.branch_id,
            staff.caller.user_id,
            staff.caller.role,
        )?;
        state
            .actors
            .branch(sale.branch_id, returns::CreateReturn(r))
            .await
    };
    match attempt.await {
        Ok(outcome) => {
            let done = if outcome.note.status == "issued" {
                "issued"
            } else {
                "pending"
            };
            Ok(see_other(&format!(
                "/console/sales/{}?done={done}#returns",
                sale.id
            )))
        }
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let notice = Notice::from_error(&e);
            show_sale(&state, &staff, sale, notice, Some(&form), code).await
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Template)]
#[template(path = "console/returns.html")]
struct ReturnsPage {
    chrome: Option<Chrome>,
    notice: Notice,
    from_date: String,
    to_date: String,
    statuses: Vec<Choice>,
    branches: Vec<BranchOption>,
    rows: Vec<(String, NoteRow)>,
    pager: Pager,
}

#[derive(Debug, Default, Deserialize)]
pub struct ReturnsQuery {
    pub from_date: Option<String>,
    pub to_date: Option<String>,
    pub status: Option<String>,
    pub branch_id: Option<String>,
    pub page: Option<i64>,
}

async fn returns_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<ReturnsQuery>,
) -> Outcome {
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch_id = staff.caller.branch_filter(requested)?;
    let client = state.pool.get().await?;
    let mut notice = Notice::default();
    let window = match DateWindow::parse(q.from_date.as_deref(), q.to_date.as_deref()) {
        Ok(w) => w,
        Err(e) => {
            notice = Notice::from_error(&e);
            DateWindow::optional(None, None)?
        }
    };
    let (from, until) = window.bounds(&client).await?;
    let status = q
        .status
        .clone()
        .filter(|s| ["pending_approval", "issued", "rejected"].contains(&s.as_str()));
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let filter = returns::ListFilter {
        branch_id,
        sale_id: None,
        status: status.clone(),
        from,
        until,
    };
    let (items, total) = returns::list(&client, &filter, Some(page)).await?;
    let current = status.clone().unwrap_or_default();
    let statuses = [
        ("", "Any status"),
        ("pending_approval", "Waiting for approval"),
        ("issued", "Issued"),
        ("rejected", "Rejected"),
    ]
    .into_iter()
    .map(|(v, l)| Choice::new(v, l, &current))
    .collect();
    let branch_text = requested.map(|b| b.to_string()).unwrap_or_default();
    let base = base_of(
        "/console/returns",
        &[
            ("from_date", q.from_date.as_deref().unwrap_or_default()),
            ("to_date", q.to_date.as_deref().unwrap_or_default()),
            ("status", current.as_str()),
            ("branch_id", branch_text.as_str()),
        ],
    );
    html_status(
        StatusCode::OK,
        &ReturnsPage {
            chrome: Some(Chrome::new(&staff, "/console/sales")),
            notice,
            from_date: q.from_date.clone().unwrap_or_default(),
            to_date: q.to_date.clone().unwrap_or_default(),
            statuses,
            branches: branch_options(&client, &staff, requested).await?,
            rows: items
                .iter()
                .map(|n| (n.sale_id.to_string(), note_row(n)))
                .collect(),
            pager: Pager::new(&base, page, total),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_return_form_keeps_only_the_lines_given() {
        let a = Uuid::now_v7();
        let b = Uuid::now_v7();
        let f = ReturnForm::of(vec![
            (format!("qty-{a}"), "2".to_owned()),
            (format!("qty-{b}"), String::new()),
            ("reason".to_owned(), "Wrong strength".to_owned()),
            ("restock".to_owned(), "on".to_owned()),
        ]);
        let r = f.request().unwrap();
        assert_eq!(r.items.len(), 1);
        assert_eq!(r.items[0].sale_item_id, a);
        let none = ReturnForm::of(vec![(format!("qty-{a}"), "0".to_owned())]);
        let e = none.request().err().unwrap();
        assert!(matches!(e, Error::Validation { field: Some(f), .. } if f == "items"));
    }
}
