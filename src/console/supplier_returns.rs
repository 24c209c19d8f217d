//! Supplier returns on a supplier's page: the returns with their debit
//! notes (what each is worth and what is left to settle invoices with),
//! and sending a batch received from the supplier back to it with the
//! reason. The return is the API's `SupplierReturnRequest`, checked by the
//! same `validate` and recorded on the branch's actor as
//! `POST /supplier-returns` records it, after the same role check.

use actix_web::web;
use serde::Deserialize;
use uuid::Uuid;

use super::forms::{Choice, Field, Form, Sent};
use super::suppliers::{self, Shown};
use super::{money, see_other, when, Notice, Outcome, Posted};
use crate::state::AppState;
use domain::buying::received::GoodsReceivedNote;
use domain::buying::returns::{
    self, RecordSupplierReturn, SupplierReturn, SupplierReturnLineRequest, SupplierReturnRequest,
};
use domain::input::path_id;
use domain::{Action, Error};

/// The reasons the API takes, with their labels.
const REASONS: [(&str, &str); 5] = [
    ("expired", "Expired"),
    ("damaged", "Damaged"),
    ("recalled", "Recalled"),
    ("wrong_item", "Wrong item delivered"),
    ("other", "Other"),
];

/// One return as the page lists it.
pub struct ReturnRow {
    pub id: String,
    pub debit_note: String,
    pub at: String,
    pub reason: String,
    pub lines: String,
    pub total: String,
    pub unused: String,
    pub by: String,
}

pub fn rows(list: &[SupplierReturn]) -> Vec<ReturnRow> {
    list.iter()
        .map(|r| ReturnRow {
            id: r.id.to_string(),
            debit_note: r.debit_note_number.clone(),
            at: when(r.created_at),
            reason: r.reason.replace('_', " "),
            lines: r
                .lines
                .iter()
                .map(|l| {
                    format!(
                        "{} batch {} × {}",
                        l.medicine_name, l.batch_number, l.quantity
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
            total: money(r.total_value),
            unused: money(r.unused_value),
            by: r.created_by_name.clone(),
        })
        .collect()
}

/// The batches received from the supplier (posted notes), each once, and
/// the branch each is in.
fn batches(notes: &[GoodsReceivedNote]) -> Vec<(Uuid, Uuid, String)> {
    let mut out: Vec<(Uuid, Uuid, String)> = Vec::new();
    for n in notes.iter().filter(|n| n.status == "posted") {
        for l in &n.lines {
            let Some(batch) = l.batch_id else { continue };
            if out.iter().any(|(b, _, _)| *b == batch) {
                continue;
            }
            out.push((
                batch,
                n.branch_id,
                format!(
                    "{}, batch {} (expires {}; {} received on {})",
                    l.medicine_name,
                    l.batch_number,
                    l.expiry_date,
                    l.quantity_received,
                    n.grn_number
                ),
            ));
        }
    }
    out
}

/// The return form over `notes`, with what was sent and the refusal (when
/// the notice is about this form) beside its field.
pub fn form(notes: &[GoodsReceivedNote], sent: &Sent, notice: &Notice) -> Form {
    let batch = sent.get("batch_id");
    let mut choices = vec![Choice::new("", "Choose a batch", &batch)];
    choices.extend(
        batches(notes)
            .into_iter()
            .map(|(id, _, label)| Choice::new(id.to_string(), label, &batch)),
    );
    let reason = sent.get("reason");
    let reasons = REASONS
        .iter()
        .map(|(v, l)| Choice::new(*v, *l, &reason))
        .collect();
    Form::new(
        vec![
            Field::select("batch_id", "Batch", choices)
                .prefixed("ret")
                .required(),
            Field::whole("quantity", "Units sent back", &sent.get("quantity"))
                .prefixed("ret")
                .required()
                .hint("Base units, at most what the batch holds."),
            Field::select("reason", "Why", reasons)
                .prefixed("ret")
                .required(),
            Field::area("notes", "Notes", &sent.get("notes")).prefixed("ret"),
        ],
        notice,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ReturnForm {
    pub batch_id: String,
    pub quantity: String,
    pub reason: String,
    pub notes: String,
}

impl ReturnForm {
    fn sent(&self) -> Sent {
        Sent::of(vec![
            ("batch_id".to_owned(), self.batch_id.clone()),
            ("quantity".to_owned(), self.quantity.clone()),
            ("reason".to_owned(), self.reason.clone()),
            ("notes".to_owned(), self.notes.clone()),
        ])
    }
}

/// The return's one line is the form's batch and units: a refusal of
/// `lines[0].…` goes beside those fields.
fn located(e: &Error) -> Notice {
    let mut notice = Notice::from_error(e);
    notice.field = match notice.field.as_deref() {
        Some("lines[0].batch_id") | Some("lines") => Some("batch_id".to_owned()),
        Some("lines[0].quantity") => Some("quantity".to_owned()),
        _ => notice.field,
    };
    notice
}

/// `POST /console/suppliers/{id}/returns`.
pub async fn send_back(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<ReturnForm>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ReturnToSupplier)?;
    let supplier_id = path_id(&id, "Supplier")?;
    let attempt = async {
        let client = state.pool.get().await?;
        let notes = suppliers::receipts(&client, &staff, supplier_id).await?;
        drop(client);
        let chosen = Uuid::parse_str(form.batch_id.trim()).ok();
        let (batch_id, branch_id, _) = batches(&notes)
            .into_iter()
            .find(|(b, _, _)| Some(*b) == chosen)
            .ok_or_else(|| {
                Error::validation("batch_id", "Choose a batch received from this supplier.")
            })?;
        let branch_id = staff.caller.branch_scope(Some(branch_id))?;
        let quantity = super::forms::decimal("quantity", &form.quantity)?
            .ok_or_else(|| Error::validation("quantity", "Enter the units sent back."))?;
        let body = SupplierReturnRequest {
            supplier_id: Some(supplier_id),
            branch_id: Some(branch_id),
            reason: Some(form.reason.clone()),
            lines: vec![SupplierReturnLineRequest {
                batch_id,
                quantity,
                pack_id: None,
            }],
            notes: Some(form.notes.clone()),
        };
        let r = body.validate(branch_id, staff.caller.user_id)?;
        state
            .actors
            .branch(branch_id, RecordSupplierReturn(r))
            .await
    };
    match attempt.await {
        Ok(made) => Ok(see_other(&format!(
            "/console/suppliers/{supplier_id}?done=returned#return-{}",
            made.id
        ))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let shown = Shown {
                notice: located(&e),
                about: "return".to_owned(),
                sent: form.sent(),
            };
            suppliers::show(&state, &staff, &id, shown, code).await
        }
        Err(e) => Err(e.into()),
    }
}

/// The supplier's returns the staff member may read (their branch; an
/// admin's every branch), newest first.
pub async fn of_supplier<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    branch_id: Option<Uuid>,
    supplier_id: Uuid,
    page: domain::paging::Page,
) -> Result<Vec<SupplierReturn>, Error> {
    let filter = returns::ListFilter {
        branch_id,
        supplier_id: Some(supplier_id),
    };
    Ok(returns::list(c, &filter, page).await?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_refusal_goes_beside_batch_or_units() {
        let e = Error::validation("lines[0].quantity", "Batch B holds 3 units.");
        assert_eq!(located(&e).field.as_deref(), Some("quantity"));
        let e = Error::validation("lines[0].batch_id", "Not this supplier's.");
        assert_eq!(located(&e).field.as_deref(), Some("batch_id"));
        let e = Error::validation("reason", "Pick one.");
        assert_eq!(located(&e).field.as_deref(), Some("reason"));
    }
}
