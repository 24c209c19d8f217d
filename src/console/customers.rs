//! Customers: the directory with search, a customer's ledger and balance,
//! and taking a payment (with a receipt to print), through the same domain
//! functions as `GET /customers`, `GET /customers/{id}/ledger` and the
//! payment desk of `POST /customers/{id}/payments`.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{self, base_of, Pager};
use super::{html_status, money, see_other, when, Chrome, Notice, Outcome, Posted, Staff};
use crate::state::AppState;
use domain::customers::{self, Customer, CustomerWrite, PaymentRequest, Taker};
use domain::input::{path_id, Flag};
use domain::paging::PageParams;
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/customers", web::get().to(directory))
        .route("/customers/{id}", web::get().to(customer_page))
        .route("/customers/{id}/payments", web::post().to(take_payment))
        .route("/customers/{id}/credit", web::post().to(set_credit));
}

const PAGE_SIZE: i64 = 50;

pub struct CustomerRow {
    pub id: String,
    pub name: String,
    pub phone: String,
    pub balance: String,
    pub limit: String,
    /// The limit as a form field holds it (no separators).
    pub limit_plain: String,
    pub credit: bool,
}

fn row(c: &Customer) -> CustomerRow {
    CustomerRow {
        id: c.id.to_string(),
        name: c.name.clone(),
        phone: c.phone.clone(),
        balance: money(c.current_balance),
        limit: money(c.credit_limit),
        limit_plain: c.credit_limit.round_dp(2).to_string(),
        credit: c.is_credit_allowed,
    }
}

#[derive(Template)]
#[template(path = "console/customers.html")]
struct DirectoryPage {
    chrome: Option<Chrome>,
    search: String,
    rows: Vec<CustomerRow>,
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
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let search = q.search.clone().unwrap_or_default();
    let client = state.pool.get().await?;
    let found = (!search.trim().is_empty()).then_some(search.as_str());
    let (items, total) = customers::list(&client, found, page).await?;
    let base = base_of("/console/customers", &[("search", search.as_str())]);
    html_status(
        StatusCode::OK,
        &DirectoryPage {
            chrome: Some(Chrome::new(&staff, "/console/customers")),
            search: search.clone(),
            rows: items.iter().map(row).collect(),
            pager: Pager::new(&base, page, total),
        },
    )
}

pub struct LedgerLine {
    pub at: String,
    pub kind: String,
    pub amount: String,
    pub after: String,
    pub notes: String,
}

#[derive(Template)]
#[template(path = "console/customer.html")]
struct CustomerPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    customer: CustomerRow,
    lines: Vec<LedgerLine>,
    pager: Pager,
    can_pay: bool,
    /// May change the credit terms (raising them needs `GiveCredit`).
    can_edit_credit: bool,
    gives_credit: bool,
    amount: String,
    notes: String,
    mutation_id: String,
    receipt: Option<Receipt>,
}

/// What a printed receipt of a payment says.
pub struct Receipt {
    pub paid: String,
    pub before: String,
    pub after: String,
    pub at: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct CustomerQuery {
    pub page: Option<i64>,
    /// The ledger row of a payment just taken, shown as its receipt.
    pub receipt: Option<String>,
    /// Set after the credit terms were saved.
    pub credit: Option<String>,
}

async fn show_customer(
    state: &AppState,
    staff: &Staff,
    id: Uuid,
    q: &CustomerQuery,
    notice: Notice,
    sent: Option<&PaymentForm>,
    code: StatusCode,
) -> Outcome {
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let client = state.pool.get().await?;
    let c = customers::get(&client, id)
        .await?
        .ok_or_else(|| Error::not_found("Customer not found"))?;
    let (items, total) = customers::ledger(&client, id, page).await?;
    // The receipt is read from the ledger, never from the address.
    let wanted = q.receipt.as_deref().and_then(|r| Uuid::parse_str(r).ok());
    let receipt = items
        .iter()
        .find(|l| Some(l.id) == wanted && l.customer_id == id)
        .map(|l| Receipt {
            paid: money(l.amount.abs()),
            before: money(l.balance_after + l.amount.abs()),
            after: money(l.balance_after),
            at: when(l.created_at),
        });
    let base = format!("/console/customers/{id}?");
    html_status(
        code,
        &CustomerPage {
            chrome: Some(Chrome::new(staff, "/console/customers")),
            csrf: staff.csrf.clone(),
            notice,
            customer: row(&c),
            lines: items
                .iter()
                .map(|l| LedgerLine {
                    at: when(l.created_at),
                    kind: l.transaction_type.replace('_', " "),
                    amount: money(l.amount),
                    after: money(l.balance_after),
                    notes: l.notes.clone(),
                })
                .collect(),
            pager: Pager::new(&base, page, total),
            can_pay: Action::TakeCustomerPayment.permits(staff.role()),
            can_edit_credit: Action::WriteCustomers.permits(staff.role()),
            gives_credit: Action::GiveCredit.permits(staff.role()),
            amount: sent.map(|f| f.amount.clone()).unwrap_or_default(),
            notes: sent.map(|f| f.notes.clone()).unwrap_or_default(),
            mutation_id: Uuid::now_v7().to_string(),
            receipt,
        },
    )
}

async fn customer_page(
    state: web::Data<AppState>,
    staff: Staff,
    id: web::Path<String>,
    q: web::Query<CustomerQuery>,
) -> Outcome {
    let id = path_id(&id, "Customer")?;
    let notice = if q.receipt.is_some() {
        Notice::done("The payment was taken.")
    } else if q.credit.is_some() {
        Notice::done("The credit terms were saved.")
    } else {
        Notice::default()
    };
    show_customer(&state, &staff, id, &q, notice, None, StatusCode::OK).await
}

#[derive(Debug, Default, Deserialize)]
pub struct PaymentForm {
    #[serde(default)]
    pub amount: String,
    #[serde(default)]
    pub notes: String,
    #[serde(default)]
    pub client_mutation_id: String,
}

async fn take_payment(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<PaymentForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::TakeCustomerPayment)?;
    let id = path_id(&id, "Customer")?;
    let attempt = async {
        let amount = forms::required_decimal("amount", &form.amount)?;
        let branch_id = staff.caller.branch_scope(None)?;
        let body = PaymentRequest {
            amount,
            notes: Some(form.notes.clone()),
            branch_id: None,
            client_mutation_id: Some(form.client_mutation_id.clone()).filter(|m| !m.is_empty()),
        };
        let payment = body.validate(Taker {
            customer_id: id,
            branch_id,
            user_id: staff.caller.user_id,
            signer: None,
        })?;
        state
            .payments
            .submit(&state.actors, branch_id, payment)
            .await
    };
    match attempt.await {
        Ok(r) => Ok(see_other(&format!(
            "/console/customers/{id}?receipt={}",
            r.ledger_id
        ))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let q = CustomerQuery::default();
            show_customer(
                &state,
                &staff,
                id,
                &q,
                Notice::from_error(&e),
                Some(&form),
                code,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CreditForm {
    pub credit_limit: String,
    pub is_credit_allowed: Option<String>,
}

/// The credit limit and whether the customer buys on account, through the
/// same edit as `PUT /customers/{id}`: anyone who writes customers may
/// lower or stop credit; raising it is for those who may give credit.
async fn set_credit(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<CreditForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::WriteCustomers)?;
    let id = path_id(&id, "Customer")?;
    let attempt = async {
        let limit = forms::required_decimal("credit_limit", &form.credit_limit)?;
        let body = CustomerWrite {
            credit_limit: Some(limit),
            is_credit_allowed: Some(Flag(forms::ticked(&form.is_credit_allowed))),
            ..CustomerWrite::default()
        };
        customers::committed::edit(&state.pool, id, body, staff.caller.role).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other(&format!("/console/customers/{id}?credit=saved"))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Forbidden(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let mut notice = Notice::from_error(&e);
            // A refusal of the role is about the limit field.
            if notice.field.is_none() {
                notice.field = Some("credit_limit".to_owned());
            }
            let q = CustomerQuery::default();
            show_customer(&state, &staff, id, &q, notice, None, code).await
        }
        Err(e) => Err(e.into()),
    }
}
