//! Transfers between branches: those from or to the reader's branch
//! (admins: any), sending stock (the medicine by scan or name, the
//! destination, the units), and receiving or calling back one in transit.
//! Each write is the API's: `TransferCreate::validate` and the source
//! branch's actor for a send, `ReceiveTransfer` on the destination's actor,
//! `CancelTransfer` on the source's, after the same branch checks as
//! `src/http/transfers.rs`.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use serde::Deserialize;
use uuid::Uuid;

use super::counter::{lookup, Found};
use super::forms::{self, Choice};
use super::{
    branch_options, html_status, optional_id, see_other, when, BranchOption, Chrome, Notice,
    Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::input::path_id;
use domain::stock::transfers::{
    self, CancelTransfer, ReceiveTransfer, Transfer, TransferCreate, IN_TRANSIT,
};
use domain::{branches, Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/transfers", web::get().to(transfers_page))
        .route("/transfers", web::post().to(send))
        .route("/transfers/{id}/receive", web::post().to(receive))
        .route("/transfers/{id}/cancel", web::post().to(cancel));
}

pub struct TransferRow {
    pub id: String,
    pub at: String,
    pub medicine: String,
    pub qty: i32,
    pub from: String,
    pub to: String,
    pub status: String,
    pub by: String,
    pub notes: String,
    pub can_receive: bool,
    pub can_cancel: bool,
}

fn row(staff: &Staff, t: &Transfer, manage: bool) -> TransferRow {
    let moving = t.status == IN_TRANSIT;
    TransferRow {
        id: t.id.to_string(),
        at: when(t.created_at),
        medicine: t.medicine_name.clone(),
        qty: t.qty,
        from: t.from_branch.clone(),
        to: t.to_branch.clone(),
        status: match t.status.as_str() {
            IN_TRANSIT => "in transit".to_owned(),
            other => other.to_owned(),
        },
        by: t.created_by_name.clone(),
        notes: t.notes.clone(),
        can_receive: manage && moving && staff.caller.can_see_branch(t.to_branch_id),
        can_cancel: manage && moving && staff.caller.can_see_branch(t.from_branch_id),
    }
}

/// The send form as posted.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct SendForm {
    pub medicine: String,
    pub from_branch_id: Option<String>,
    pub to_branch_id: String,
    pub qty: String,
    pub notes: String,
}

#[derive(Template)]
#[template(path = "console/transfers.html")]
struct TransfersPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    page_error: Option<String>,
    branches: Vec<BranchOption>,
    rows: Vec<TransferRow>,
    can_send: bool,
    from: Vec<BranchOption>,
    to: Vec<Choice>,
    sent: SendForm,
}

#[derive(Debug, Default, Deserialize)]
pub struct TransfersQuery {
    pub branch_id: Option<String>,
    pub done: Option<String>,
}

async fn show(
    state: &AppState,
    staff: &Staff,
    requested: Option<Uuid>,
    sent: SendForm,
    notice: Notice,
    code: StatusCode,
) -> Outcome {
    staff.caller.require(Action::ReadTransfers)?;
    let filter = transfers::ListFilter {
        branch_id: staff.caller.branch_filter(requested)?,
        from_date: None,
        to_date: None,
    };
    let client = state.pool.get().await?;
    let items = transfers::list(&client, &filter).await?;
    let manage = Action::ManageTransfers.permits(staff.role());
    let own = staff.caller.branch_scope(None)?;
    let from_chosen = optional_id("from_branch_id", sent.from_branch_id.as_deref())
        .ok()
        .flatten()
        .unwrap_or(own);
    let mut from = branch_options(&client, staff, Some(from_chosen)).await?;
    from.retain(|b| !b.id.is_empty());
    let mut to = vec![Choice::new("", "Choose a branch", &sent.to_branch_id)];
    to.extend(
        branches::list(&client, None)
            .await?
            .iter()
            .filter(|b| staff.caller.any_branch() || b.id != own)
            .map(|b| {
                Choice::new(
                    b.id.to_string(),
                    format!("{} ({})", b.name, b.code),
                    &sent.to_branch_id,
                )
            }),
    );
    let page_error = match notice.field.as_deref() {
        Some("medicine" | "medicine_id" | "to_branch_id" | "qty" | "notes") => None,
        _ => notice.error.clone(),
    };
    html_status(
        code,
        &TransfersPage {
            chrome: Some(Chrome::new(staff, "/console/stock")),
            csrf: staff.csrf.clone(),
            page_error,
            notice,
            branches: branch_options(&client, staff, requested).await?,
            rows: items.iter().map(|t| row(staff, t, manage)).collect(),
            can_send: manage,
            from,
            to,
            sent,
        },
    )
}

async fn transfers_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<TransfersQuery>,
) -> Outcome {
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let notice = match q.done.as_deref() {
        Some("sent") => Notice::done("The stock left the branch: it is in transit."),
        Some("received") => Notice::done("The transfer was received: its stock is on the shelf."),
        Some("cancelled") => Notice::done("The transfer was called back: its stock is home."),
        _ => Notice::default(),
    };
    show(
        &state,
        &staff,
        requested,
        SendForm::default(),
        notice,
        StatusCode::OK,
    )
    .await
}

async fn send(state: web::Data<AppState>, posted: Posted<SendForm>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManageTransfers)?;
    let attempt = async {
        let from_branch_id = staff.caller.branch_scope(optional_id(
            "from_branch_id",
            form.from_branch_id.as_deref(),
        )?)?;
        let text = form.medicine.trim();
        if text.is_empty() {
            return Err(Error::validation(
                "medicine",
                "Scan or name the medicine to send.",
            ));
        }
        let medicine_id = {
            let client = state.pool.get().await?;
            match lookup(&client, text, from_branch_id, "medicine").await? {
                Found::Scanned(named) => named.medicine_id,
                Found::One(m) => m.id,
                Found::Many(_) => {
                    return Err(Error::validation(
                        "medicine",
                        format!("Several medicines match {text}: type more of the name."),
                    ))
                }
            }
        };
        let to_branch_id = optional_id("to_branch_id", Some(&form.to_branch_id))?
            .ok_or_else(|| Error::validation("to_branch_id", "Choose the branch it goes to."))?;
        let qty = forms::required_decimal("qty", &form.qty)?;
        let cmd = TransferCreate {
            medicine_id,
            from_branch_id,
            to_branch_id,
            qty,
            notes: Some(form.notes.clone()),
        }
        .validate(staff.caller.user_id)?;
        state.actors.branch(cmd.from_branch_id, cmd).await
    };
    match attempt.await {
        Ok(_) => Ok(see_other("/console/transfers?done=sent")),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            show(&state, &staff, None, form, Notice::from_error(&e), code).await
        }
        Err(e) => Err(e.into()),
    }
}

/// A transfer the staff member works at either end of (404 otherwise).
async fn visible(state: &AppState, staff: &Staff, raw: &str) -> Result<Transfer, Error> {
    let id = path_id(raw, "Transfer")?;
    let client = state.pool.get().await?;
    transfers::get(&client, id)
        .await?
        .filter(|t| {
            staff.caller.can_see_branch(t.from_branch_id)
                || staff.caller.can_see_branch(t.to_branch_id)
        })
        .ok_or_else(|| Error::not_found("Transfer not found"))
}

async fn refused(state: &AppState, staff: &Staff, e: Error) -> Outcome {
    match e {
        Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_) => {
            let code = actix_web::ResponseError::status_code(&e);
            show(
                state,
                staff,
                None,
                SendForm::default(),
                Notice::from_error(&e),
                code,
            )
            .await
        }
        other => Err(other.into()),
    }
}

async fn receive(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<super::NoFields>,
) -> Outcome {
    let staff = posted.staff;
    staff.caller.require(Action::ManageTransfers)?;
    let t = visible(&state, &staff, &id).await?;
    if !staff.caller.can_see_branch(t.to_branch_id) {
        return Err(Error::forbidden("Only the destination branch can receive a transfer.").into());
    }
    let cmd = ReceiveTransfer {
        transfer_id: t.id,
        to_branch_id: t.to_branch_id,
        user_id: staff.caller.user_id,
    };
    match state.actors.branch(t.to_branch_id, cmd).await {
        Ok(_) => Ok(see_other("/console/transfers?done=received")),
        Err(e) => refused(&state, &staff, e).await,
    }
}

async fn cancel(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<super::NoFields>,
) -> Outcome {
    let staff = posted.staff;
    staff.caller.require(Action::ManageTransfers)?;
    let t = visible(&state, &staff, &id).await?;
    let cmd = CancelTransfer {
        transfer_id: t.id,
        user_id: staff.caller.user_id,
    };
    match state.actors.branch(t.from_branch_id, cmd).await {
        Ok(_) => Ok(see_other("/console/transfers?done=cancelled")),
        Err(e) => refused(&state, &staff, e).await,
    }
}
