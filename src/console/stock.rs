//! Stock: a branch's batches (expiry, quantity, cost, status) filtered to
//! expiring, expired, quarantined or recalled; quarantine, recall and
//! release through the same function as
//! `POST /supplier-finance/batches/{id}/quarantine`; write-offs (with the
//! witness rules) and the expired list written off in one action through
//! the branch actor's `RecordWriteOff`, as `POST /stock/write-offs`.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use rust_decimal::Decimal;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{self, base_of, Choice, Pager};
use super::{
    branch_options, html_status, money, optional_id, see_other, BranchOption, Chrome, Notice,
    Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::input::path_id;
use domain::paging::PageParams;
use domain::stock::quarantine::{set_status, QuarantineRequest};
use domain::stock::shelf::{self, ShelfFilter, EXPIRING_DAYS};
use domain::write_offs::{self, RecordWriteOff, WriteOffLineRequest, WriteOffRequest, REASONS};
use domain::{users, Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/stock", web::get().to(stock_page))
        .route(
            "/stock/batches/{id}/status",
            web::post().to(set_batch_status),
        )
        .route("/stock/write-offs", web::post().to(write_off))
        .route(
            "/stock/write-offs/expired",
            web::post().to(write_off_expired),
        );
}

const PAGE_SIZE: i64 = 50;

pub struct BatchRow {
    pub id: String,
    pub medicine: String,
    pub batch: String,
    pub expiry: String,
    pub expired: bool,
    pub quantity: i32,
    pub unit_cost: String,
    pub value: String,
    pub status: String,
    pub controlled: bool,
}

#[derive(Template)]
#[template(path = "console/stock.html")]
struct StockPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    views: Vec<Choice>,
    search: String,
    days: String,
    branches: Vec<BranchOption>,
    /// The branch writes act on (none: an admin looking at every branch).
    branch: String,
    rows: Vec<BatchRow>,
    pager: Pager,
    /// This list's address, for the forms to come back to.
    back: String,
    can_quarantine: bool,
    can_count: bool,
    can_see_transfers: bool,
    can_write_off: bool,
    reasons: Vec<Choice>,
    witnesses: Vec<Choice>,
    sent: WriteOffForm,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct StockQuery {
    pub view: Option<String>,
    pub search: Option<String>,
    pub days: Option<String>,
    pub branch_id: Option<String>,
    pub page: Option<i64>,
    pub done: Option<String>,
}

async fn stock_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<StockQuery>,
) -> Outcome {
    let notice = match q.done.as_deref() {
        Some("quarantined") => Notice::done("The batch is quarantined: it is not sold or moved."),
        Some("recalled") => Notice::done("The batch is recalled: it is not sold or moved."),
        Some("active") => Notice::done("The batch is released: it may be sold again."),
        Some("written-off") => Notice::done("The stock was written off."),
        _ => Notice::default(),
    };
    show_stock(
        &state,
        &staff,
        &q,
        notice,
        WriteOffForm::default(),
        StatusCode::OK,
    )
    .await
}

async fn show_stock(
    state: &AppState,
    staff: &Staff,
    q: &StockQuery,
    mut notice: Notice,
    sent: WriteOffForm,
    code: StatusCode,
) -> Outcome {
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch_id = staff.caller.branch_filter(requested)?;
    let view = q.view.clone().unwrap_or_else(|| "all".to_owned());
    let days = match q.days.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => EXPIRING_DAYS,
        Some(d) => d.parse().unwrap_or(0),
    };
    let mut filter = ShelfFilter {
        branch_id,
        view: view.clone(),
        search: q.search.clone().unwrap_or_default(),
        days,
    };
    if let Err(e) = filter.check() {
        if notice.error.is_none() {
            notice = Notice::from_error(&e);
        }
        filter.view = "all".to_owned();
        filter.days = EXPIRING_DAYS;
    }
    let page = PageParams {
        page: q.page,
        page_size: Some(PAGE_SIZE),
    }
    .resolve(PAGE_SIZE)?;
    let client = state.pool.get().await?;
    let (items, total) = shelf::list(&client, &filter, page).await?;
    let rows = items
        .iter()
        .map(|b| BatchRow {
            id: b.batch_id.to_string(),
            medicine: b.medicine_name.clone(),
            batch: b.batch_number.clone(),
            expiry: b.expiry_date.to_string(),
            expired: b.expired,
            quantity: b.qty_remaining,
            unit_cost: b.unit_cost.normalize().to_string(),
            value: money(b.value),
            status: b.regulator_status.clone(),
            controlled: b.is_controlled,
        })
        .collect();
    let views = [
        ("all", "Everything in stock"),
        ("expiring", "Expiring soon"),
        ("expired", "Expired"),
        ("quarantined", "Quarantined"),
        ("recalled", "Recalled"),
    ]
    .into_iter()
    .map(|(v, l)| Choice::new(v, l, &filter.view))
    .collect();
    let reasons = REASONS
        .into_iter()
        .map(|r| Choice::new(r, r, &sent.reason))
        .collect();
    let mut witnesses = vec![Choice::new("", "Nobody chosen (type a name)", "")];
    if let Some(b) = branch_id {
        let users_filter = users::ListFilter {
            branch_id: Some(b),
            role: None,
            search: None,
        };
        let page = PageParams {
            page: Some(1),
            page_size: Some(100),
        }
        .resolve(100)?;
        let (people, _) = users::list(&client, &users_filter, page).await?;
        for u in people
            .iter()
            .filter(|u| u.is_active && u.id != staff.caller.user_id)
        {
            witnesses.push(Choice::new(
                u.id.to_string(),
                u.full_name.clone(),
                &sent.witness_user_id,
            ));
        }
    }
    let search = filter.search.clone();
    let days_text = filter.days.to_string();
    let branch_text = requested.map(|b| b.to_string()).unwrap_or_default();
    let base = base_of(
        "/console/stock",
        &[
            ("view", filter.view.as_str()),
            ("search", search.as_str()),
            ("days", days_text.as_str()),
            ("branch_id", branch_text.as_str()),
        ],
    );
    html_status(
        code,
        &StockPage {
            chrome: Some(Chrome::new(staff, "/console/stock")),
            csrf: staff.csrf.clone(),
            notice,
            views,
            search,
            days: days_text,
            branches: branch_options(&client, staff, requested).await?,
            branch: branch_id.map(|b| b.to_string()).unwrap_or_default(),
            rows,
            back: format!("{base}page={}", page.page),
            pager: Pager::new(&base, page, total),
            can_quarantine: Action::QuarantineBatches.permits(staff.role()),
            can_count: Action::SubmitStockCount.permits(staff.role()),
            can_see_transfers: Action::ReadTransfers.permits(staff.role()),
            can_write_off: Action::WriteOffStock.permits(staff.role()) && branch_id.is_some(),
            reasons,
            witnesses,
            sent,
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct StatusForm {
    #[serde(default)]
    pub status: String,
    /// Where to come back to (the list's filters).
    #[serde(default)]
    pub back: String,
}

/// A return address inside the stock page only.
fn back_to(back: &str, done: &str) -> String {
    let query = back.strip_prefix("/console/stock?").unwrap_or_default();
    let kept: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k != "done")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut pairs = kept;
    pairs.push(("done".to_owned(), done.to_owned()));
    let q = serde_urlencoded::to_string(&pairs).unwrap_or_default();
    format!("/console/stock?{q}")
}

async fn set_batch_status(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<StatusForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::QuarantineBatches)?;
    let id = path_id(&id, "Batch")?;
    let status = QuarantineRequest {
        status: form.status.clone(),
    }
    .validate()?;
    let batch = set_status(&state.pool, &staff.caller.acting(), id, status).await?;
    Ok(see_other(&back_to(&form.back, &batch.regulator_status)))
}

/// The write-off form: `qty-<batch id>` per batch, and the rest.
#[derive(Debug, Default, Clone)]
pub struct WriteOffForm {
    pub branch_id: String,
    pub reason: String,
    pub notes: String,
    pub witness_name: String,
    pub witness_user_id: String,
    pub lines: Vec<(Uuid, String)>,
    pub back: String,
}

impl WriteOffForm {
    fn of(pairs: Vec<(String, String)>) -> WriteOffForm {
        let mut f = WriteOffForm::default();
        for (k, v) in pairs {
            match k.as_str() {
                "branch_id" => f.branch_id = v,
                "reason" => f.reason = v,
                "notes" => f.notes = v,
                "witness_name" => f.witness_name = v,
                "witness_user_id" => f.witness_user_id = v,
                "back" => f.back = v,
                other => {
                    if let Some(id) = forms::row_id(other, "qty") {
                        f.lines.push((id, v));
                    }
                }
            }
        }
        f
    }

    fn request(&self, items: Vec<WriteOffLineRequest>) -> Result<WriteOffRequest, Error> {
        Ok(WriteOffRequest {
            branch_id: optional_id("branch_id", Some(&self.branch_id))?,
            reason: Some(self.reason.clone()),
            items,
            notes: Some(self.notes.clone()),
            witness_name: Some(self.witness_name.clone()),
            witness_user_id: optional_id("witness_user_id", Some(&self.witness_user_id))?,
        })
    }

    fn lines(&self) -> Result<Vec<WriteOffLineRequest>, Error> {
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
            items.push(WriteOffLineRequest {
                batch_id: *id,
                quantity,
            });
        }
        if items.is_empty() {
            return Err(Error::validation(
                "items",
                "Enter how many units of at least one batch are written off.",
            ));
        }
        Ok(items)
    }

    /// The list's filters the form came from.
    fn query(&self) -> StockQuery {
        let query = self
            .back
            .strip_prefix("/console/stock?")
            .unwrap_or_default();
        serde_urlencoded::from_str(query).unwrap_or_default()
    }
}

async fn record(
    state: &AppState,
    staff: &Staff,
    form: &WriteOffForm,
    items: Result<Vec<WriteOffLineRequest>, Error>,
) -> Result<(), Error> {
    staff.caller.require(Action::WriteOffStock)?;
    let body = form.request(items?)?;
    let branch_id = staff.caller.branch_scope(body.branch_id)?;
    let w = body.validate(branch_id, staff.caller.user_id)?;
    state.actors.branch(branch_id, RecordWriteOff(w)).await?;
    Ok(())
}

async fn answer(
    state: &AppState,
    staff: &Staff,
    form: WriteOffForm,
    done: Result<(), Error>,
) -> Outcome {
    match done {
        Ok(()) => Ok(see_other(&back_to(&form.back, "written-off"))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let q = form.query();
            show_stock(state, staff, &q, Notice::from_error(&e), form, code).await
        }
        Err(e) => Err(e.into()),
    }
}

async fn write_off(state: web::Data<AppState>, posted: Posted<Vec<(String, String)>>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::WriteOffStock)?;
    let form = WriteOffForm::of(form);
    let done = record(&state, &staff, &form, form.lines()).await;
    answer(&state, &staff, form, done).await
}

/// Every expired batch of the branch holding stock, written off whole with
/// the reason `expired`.
async fn write_off_expired(
    state: web::Data<AppState>,
    posted: Posted<Vec<(String, String)>>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::WriteOffStock)?;
    let mut form = WriteOffForm::of(form);
    form.reason = "expired".to_owned();
    let attempt = async {
        let requested = optional_id("branch_id", Some(&form.branch_id))?;
        let branch_id = staff.caller.branch_scope(requested)?;
        let client = state.pool.get().await?;
        let expired = write_offs::expired(&client, branch_id).await?;
        if expired.is_empty() {
            return Err(Error::validation(
                "items",
                "No batch of this branch is expired with stock left.",
            ));
        }
        let items = expired
            .iter()
            .map(|b| WriteOffLineRequest {
                batch_id: b.batch_id,
                quantity: Decimal::from(b.quantity),
            })
            .collect();
        record(&state, &staff, &form, Ok(items)).await
    };
    let done = attempt.await;
    answer(&state, &staff, form, done).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_way_back_stays_on_the_stock_page() {
        assert_eq!(
            back_to("/console/stock?view=expired&done=x", "recalled"),
            "/console/stock?view=expired&done=recalled"
        );
        assert_eq!(
            back_to("https://elsewhere.example/", "active"),
            "/console/stock?done=active"
        );
    }
}
