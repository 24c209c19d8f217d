//! Suppliers, on the buying side (the roles that read purchase orders;
//! never a cashier, even by address): the directory with search, and a
//! supplier's page with its orders, goods received notes, invoices with
//! their match status (each billed line's difference from the receipt,
//! highlighted when it holds the invoice) and the balance owed. An
//! invoice on hold is released, and an invoice paid, through the same
//! domain functions as `POST /supplier-finance/invoices/{id}/release` and
//! `/payments`, after the same role checks. Recording an invoice is in
//! [`super::supplier_invoices`], returns and debit notes in
//! [`super::supplier_returns`]; both are forms of this page.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{self, base_of, Choice, Form, Pager, Sent};
use super::supplier_invoices::{self, RecordView};
use super::supplier_returns::{self, ReturnRow};
use super::{
    branch_options, html_status, money, see_other, when, Chrome, Notice, Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::buying::received::GoodsReceivedNote;
use domain::buying::{orders, received};
use domain::input::path_id;
use domain::paging::{Page, PageParams};
use domain::suppliers::invoices::{self, SupplierInvoice, SupplierPaymentRequest};
use domain::suppliers::matching::{self, ReleaseRequest};
use domain::suppliers::{self, Activity};
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/suppliers", web::get().to(directory))
        .route("/suppliers/{id}", web::get().to(supplier_page))
        .route(
            "/suppliers/{id}/invoices",
            web::post().to(supplier_invoices::record),
        )
        .route(
            "/suppliers/{id}/returns",
            web::post().to(supplier_returns::send_back),
        )
        .route("/supplier-invoices/{id}/release", web::post().to(release))
        .route("/supplier-invoices/{id}/payments", web::post().to(pay));
}

const PAGE_SIZE: i64 = 50;

pub struct SupplierRow {
    pub id: String,
    pub name: String,
    pub contact: String,
    pub phone: String,
    pub lead_time: i32,
}

#[derive(Template)]
#[template(path = "console/suppliers.html")]
struct DirectoryPage {
    chrome: Option<Chrome>,
    search: String,
    rows: Vec<SupplierRow>,
    pager: Pager,
}

#[derive(Debug, Default, Deserialize)]
pub struct DirectoryQuery {
    pub search: Option<String>,
    pub page: Option<i64>,
}

async fn directory(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<DirectoryQuery>,
) -> Outcome {
    staff.caller.require(Action::ReadPurchaseOrders)?;
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let search = q.search.clone().unwrap_or_default();
    let client = state.pool.get().await?;
    let found = (!search.trim().is_empty()).then_some(search.as_str());
    let (items, total) = suppliers::list(&client, found, Activity::Active, page).await?;
    let base = base_of("/console/suppliers", &[("search", search.as_str())]);
    html_status(
        StatusCode::OK,
        &DirectoryPage {
            chrome: Some(Chrome::new(&staff, "/console/purchase-orders")),
            rows: items
                .iter()
                .map(|s| SupplierRow {
                    id: s.id.to_string(),
                    name: s.name.clone(),
                    contact: s.contact_person.clone(),
                    phone: s.phone.clone(),
                    lead_time: s.lead_time_days,
                })
                .collect(),
            search,
            pager: Pager::new(&base, page, total),
        },
    )
}

pub struct OrderRow {
    pub id: String,
    pub number: String,
    pub status: String,
    pub total: String,
}

pub struct NoteRow {
    pub number: String,
    pub status: String,
    pub reference: String,
    pub at: String,
    pub total: String,
}

pub struct BilledLine {
    pub grn: String,
    pub medicine: String,
    pub quantity: i32,
    pub billed: String,
    pub received: String,
    pub difference: String,
    pub hold_reason: String,
}

pub struct InvoiceRow {
    pub id: String,
    pub number: String,
    pub total: String,
    pub paid: String,
    pub balance: String,
    pub status: String,
    pub match_status: String,
    pub on_hold: bool,
    pub payable: bool,
    pub due: String,
    pub lines: Vec<BilledLine>,
    pub charges: String,
}

fn invoice_row(i: &SupplierInvoice) -> InvoiceRow {
    InvoiceRow {
        id: i.id.to_string(),
        number: i.invoice_no.clone(),
        total: money(i.total_amount),
        paid: money(i.paid_amount),
        balance: money(i.balance),
        status: i.status.clone(),
        match_status: i.match_status.replace('_', " "),
        on_hold: i.match_status == "on_hold",
        payable: i.status != "paid" && i.match_status != "on_hold",
        due: i.due_date.map(|d| d.to_string()).unwrap_or_default(),
        lines: i
            .lines
            .iter()
            .map(|l| BilledLine {
                grn: l.grn_number.clone(),
                medicine: l.medicine_name.clone(),
                quantity: l.quantity,
                billed: money(l.unit_cost),
                received: money(l.received_unit_cost),
                difference: match l.price_difference_percent {
                    Some(p) => format!("{} ({}%)", money(l.price_difference), p.round_dp(1)),
                    None => money(l.price_difference),
                },
                hold_reason: l.hold_reason.clone().unwrap_or_default(),
            })
            .collect(),
        charges: money(i.charges_total),
    }
}

#[derive(Template)]
#[template(path = "console/supplier.html")]
struct SupplierPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    supplier_id: String,
    name: String,
    contact: String,
    phone: String,
    email: String,
    address: String,
    orders: Vec<OrderRow>,
    notes: Vec<NoteRow>,
    invoices: Vec<InvoiceRow>,
    can_see_invoices: bool,
    can_release: bool,
    balance: String,
    methods: Vec<Choice>,
    /// The invoice the notice is about (its form shows the error), or
    /// `record` / `return` for those forms.
    about: String,
    /// Recording an invoice (for those who handle supplier invoices).
    record: Option<RecordView>,
    can_read_returns: bool,
    returns: Vec<ReturnRow>,
    /// Sending a batch back (for those who return to suppliers).
    return_form: Option<Form>,
}

/// What a supplier's page shows besides the supplier: the notice, which
/// form it is about (an invoice id, `record` or `return`) and what that
/// form sent, to show it again.
#[derive(Default)]
pub struct Shown {
    pub notice: Notice,
    pub about: String,
    pub sent: Sent,
}

/// The supplier's goods received notes the staff member may read (their
/// branch; an admin's every branch), newest first, with their lines.
pub async fn receipts<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    staff: &Staff,
    supplier_id: Uuid,
) -> Result<Vec<GoodsReceivedNote>, Error> {
    if !Action::ReadGoodsReceived.permits(staff.role()) {
        return Ok(Vec::new());
    }
    let branch_id = staff.caller.branch_filter(None)?;
    let first = Page {
        page: 1,
        page_size: PAGE_SIZE,
    };
    let filter = received::ListFilter {
        branch_id,
        supplier_id: Some(supplier_id),
        purchase_order_id: None,
        status: None,
    };
    Ok(received::list(client, &filter, first).await?.0)
}

#[derive(Debug, Default, Deserialize)]
pub struct SupplierQuery {
    pub done: Option<String>,
}

pub async fn show(
    state: &AppState,
    staff: &Staff,
    raw: &str,
    shown: Shown,
    code: StatusCode,
) -> Outcome {
    let Shown {
        notice,
        about,
        sent,
    } = shown;
    staff.caller.require(Action::ReadPurchaseOrders)?;
    let id = path_id(raw, "Supplier")?;
    let client = state.pool.get().await?;
    let s = suppliers::get(&client, id)
        .await?
        .ok_or_else(|| Error::not_found("Supplier not found"))?;
    let branch_id = staff.caller.branch_filter(None)?;
    let first = Page {
        page: 1,
        page_size: PAGE_SIZE,
    };
    let (po, _) = orders::list(
        &client,
        &orders::ListFilter {
            branch_id,
            supplier_id: Some(id),
            status: None,
        },
        first,
    )
    .await?;
    let notes = receipts(&client, staff, id).await?;
    let can_see_invoices = Action::ManageSupplierInvoices.permits(staff.role());
    let bills = if can_see_invoices {
        invoices::list(
            &client,
            invoices::ListFilter {
                branch_id,
                supplier_id: Some(id),
                status: None,
            },
        )
        .await?
    } else {
        Vec::new()
    };
    let balance: Decimal = bills.iter().map(|i| i.balance).sum();
    let methods = [
        ("cash", "Cash"),
        ("bank_transfer", "Bank transfer"),
        ("mobile_money", "Mobile money"),
        ("cheque", "Cheque"),
        ("card", "Card"),
        ("debit_note", "Debit note (a supplier return)"),
    ]
    .into_iter()
    .map(|(v, l)| Choice::new(v, l, "bank_transfer"))
    .collect();
    let quiet = Notice::default();
    let for_record = if about == "record" { &notice } else { &quiet };
    let for_return = if about == "return" { &notice } else { &quiet };
    let record = if can_see_invoices {
        let branches = branch_options(&client, staff, None).await?;
        Some(supplier_invoices::view(
            &notes, &sent, for_record, &branches,
        ))
    } else {
        None
    };
    let can_read_returns = Action::ReadSupplierReturns.permits(staff.role());
    let returns = if can_read_returns {
        supplier_returns::of_supplier(&client, branch_id, id, first).await?
    } else {
        Vec::new()
    };
    let return_form = Action::ReturnToSupplier
        .permits(staff.role())
        .then(|| supplier_returns::form(&notes, &sent, for_return));
    html_status(
        code,
        &SupplierPage {
            chrome: Some(Chrome::new(staff, "/console/purchase-orders")),
            csrf: staff.csrf.clone(),
            notice,
            supplier_id: s.id.to_string(),
            name: s.name.clone(),
            contact: s.contact_person.clone(),
            phone: s.phone.clone(),
            email: s.email.clone(),
            address: s.address.clone(),
            orders: po
                .iter()
                .map(|o| OrderRow {
                    id: o.id.to_string(),
                    number: o.po_number.clone(),
                    status: o.status.clone(),
                    total: money(o.total),
                })
                .collect(),
            notes: notes
                .iter()
                .map(|n| NoteRow {
                    number: n.grn_number.clone(),
                    status: n.status.clone(),
                    reference: n.delivery_reference.clone(),
                    at: when(n.created_at),
                    total: money(n.total),
                })
                .collect(),
            invoices: bills.iter().map(invoice_row).collect(),
            can_see_invoices,
            can_release: Action::ReleaseSupplierInvoices.permits(staff.role()),
            balance: money(balance),
            methods,
            record,
            can_read_returns,
            returns: supplier_returns::rows(&returns),
            return_form,
            about,
        },
    )
}

async fn supplier_page(
    state: web::Data<AppState>,
    staff: Staff,
    id: web::Path<String>,
    q: web::Query<SupplierQuery>,
) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("released") => Notice::done("The invoice was released: it can be paid as billed."),
        Some("paid") => Notice::done("The payment was recorded."),
        Some("recorded") => {
            Notice::done("The invoice was recorded: its match status is shown below.")
        }
        Some("returned") => Notice::done(
            "The stock was sent back: its debit note is listed under Returns and debit notes.",
        ),
        _ => Notice::default(),
    };
    let shown = Shown {
        notice,
        ..Shown::default()
    };
    show(&state, &staff, &id, shown, StatusCode::OK).await
}

/// The invoice `raw` names, when the staff member's branch holds it.
async fn invoice_of(state: &AppState, staff: &Staff, raw: &str) -> Result<SupplierInvoice, Error> {
    let id = path_id(raw, "Supplier invoice")?;
    let client = state.pool.get().await?;
    invoices::get(&client, id)
        .await?
        .filter(|i| staff.caller.can_see_branch(i.branch_id))
        .ok_or_else(|| Error::not_found("Supplier invoice not found"))
}

async fn answered(
    state: &AppState,
    staff: &Staff,
    invoice: &SupplierInvoice,
    result: Result<(), Error>,
    done: &str,
) -> Outcome {
    let supplier = invoice.supplier_id.to_string();
    match result {
        Ok(()) => Ok(see_other(&format!(
            "/console/suppliers/{supplier}?done={done}#invoice-{}",
            invoice.id
        ))),
        Err(
            e @ (Error::Validation { .. }
            | Error::Coded { .. }
            | Error::Conflict(_)
            | Error::Forbidden(_)),
        ) => {
            let code = actix_web::ResponseError::status_code(&e);
            let shown = Shown {
                notice: Notice::from_error(&e),
                about: invoice.id.to_string(),
                sent: Sent::default(),
            };
            show(state, staff, &supplier, shown, code).await
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ReleaseForm {
    pub reason: String,
}

async fn release(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<ReleaseForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ReleaseSupplierInvoices)?;
    let invoice = invoice_of(&state, &staff, &id).await?;
    let result = matching::release(
        &state.pool,
        &staff.caller.acting(),
        invoice.id,
        ReleaseRequest {
            reason: Some(form.reason.clone()),
        },
    )
    .await
    .map(|_| ());
    answered(&state, &staff, &invoice, result, "released").await
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PaymentForm {
    pub amount: String,
    pub method: String,
    pub reference: String,
}

async fn pay(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<PaymentForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManageSupplierInvoices)?;
    let invoice = invoice_of(&state, &staff, &id).await?;
    let result = async {
        let amount = forms::required_decimal("amount", &form.amount)?;
        invoices::pay(
            &state.pool,
            &state.actors,
            &staff.caller.acting(),
            invoice.id,
            SupplierPaymentRequest {
                amount: Some(amount),
                method: Some(form.method.clone()).filter(|m| !m.is_empty()),
                reference: Some(form.reference.clone()).filter(|r| !r.trim().is_empty()),
            },
        )
        .await
        .map(|_| ())
    }
    .await;
    answered(&state, &staff, &invoice, result, "paid").await
}
