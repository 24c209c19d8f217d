//! Recording a supplier invoice on a supplier's page: its number, due
//! date and total, the goods received lines it bills (units and price per
//! line, blank price meaning the receipt's) and the charges billed beside
//! them. It is the API's `InvoiceRequest`, recorded by the same
//! `invoices::record` as `POST /supplier-finance/invoices`, after the same
//! role check; the page then shows the invoice with its match status.

use actix_web::web;
use rust_decimal::Decimal;
use uuid::Uuid;

use super::forms::{self, Choice, Field, Form, Sent};
use super::suppliers::{self, Shown};
use super::{optional_id, see_other, BranchOption, Notice, Outcome, Posted};
use crate::state::AppState;
use domain::buying::received::{GoodsReceivedNote, ReceiptChargeRequest};
use domain::input::path_id;
use domain::suppliers::invoices::{self, InvoiceRequest};
use domain::suppliers::matching::InvoiceLineRequest;
use domain::{Action, Error};

/// The kinds of charge the API takes beside an invoice's lines, with
/// their labels.
const CHARGES: [(&str, &str); 4] = [
    ("freight", "Freight"),
    ("insurance", "Insurance"),
    ("clearing", "Clearing"),
    ("other", "Other charges"),
];

/// A posted receipt line with units not yet billed.
pub struct BillableLine {
    pub id: String,
    pub grn: String,
    pub medicine: String,
    pub batch: String,
    /// What the line counts: `units` or `packs of N`.
    pub counted: String,
    /// Units (or packs) received and not yet billed.
    pub left: i32,
    /// The receipt's price of one, as received.
    pub cost: String,
    pub bill: String,
    pub price: String,
    pub error: Option<String>,
    line_id: Uuid,
    branch_id: Uuid,
    unit_cost: Decimal,
}

/// The receipt lines of `notes` that can still be billed.
fn billable(notes: &[GoodsReceivedNote], sent: &Sent, notice: &Notice) -> Vec<BillableLine> {
    let mut out = Vec::new();
    for n in notes.iter().filter(|n| n.status == "posted") {
        for l in &n.lines {
            let per = l.pack_units.max(1);
            let left = (l.quantity_received - l.quantity_invoiced) / per;
            if left <= 0 {
                continue;
            }
            let id = l.id.to_string();
            out.push(BillableLine {
                grn: n.grn_number.clone(),
                medicine: l.medicine_name.clone(),
                batch: l.batch_number.clone(),
                counted: if l.pack_id.is_some() {
                    format!("packs of {per}")
                } else {
                    "units".to_owned()
                },
                left,
                cost: l.unit_cost.normalize().to_string(),
                bill: sent.row("bill", &id),
                price: sent.row("price", &id),
                error: notice.for_field(&format!("bill-{id}")).map(str::to_owned),
                line_id: l.id,
                branch_id: n.branch_id,
                unit_cost: l.unit_cost,
                id,
            });
        }
    }
    out
}

/// The form recording an invoice, as the supplier's page draws it.
pub struct RecordView {
    pub form: Form,
    pub lines: Vec<BillableLine>,
    pub charges: Form,
}

/// The record form over `notes`, with what was sent and the refusal (when
/// the notice is about this form) beside its field. `branches` is the
/// caller's branch picker (`super::branch_options`): empty for staff of
/// one branch, else an admin picks where an invoice that bills no
/// received line goes.
pub fn view(
    notes: &[GoodsReceivedNote],
    sent: &Sent,
    notice: &Notice,
    branches: &[BranchOption],
) -> RecordView {
    let lines = billable(notes, sent, notice);
    let on_a_line = lines.iter().any(|l| l.error.is_some());
    let mut header = vec![
        Field::text(
            "invoice_no",
            "Supplier's invoice number",
            &sent.get("invoice_no"),
        )
        .prefixed("inv"),
        Field::date("due_date", "Due date", &sent.get("due_date"))
            .prefixed("inv")
            .hint("Blank: no due date."),
        Field::number("total_amount", "Invoice total", &sent.get("total_amount"))
            .prefixed("inv")
            .required()
            .hint("As printed: the lines billed and the charges must come to it."),
        Field::area("notes", "Notes", &sent.get("notes")).prefixed("inv"),
    ];
    if let Some(picker) = branch_field(branches, &sent.get("branch_id")) {
        header.insert(0, picker);
    }
    let charges = CHARGES
        .iter()
        .map(|(kind, label)| Field::number(kind, label, &sent.get(kind)).prefixed("inv"))
        .collect();
    let quiet = Notice::default();
    let header_notice = if on_a_line { &quiet } else { notice };
    let charges = Form::new(charges, header_notice);
    let mut form = Form::new(header, header_notice);
    if charges.fields.iter().any(|f| f.error.is_some()) || on_a_line {
        form.error = None;
    }
    RecordView {
        form,
        lines,
        charges: Form::plain(charges.fields),
    }
}

/// An admin's choice of the invoice's branch: the billed lines' branch
/// when it bills any (the API files it there), else the one picked, else
/// the admin's own (as the API does when `branch_id` is left out).
fn branch_field(branches: &[BranchOption], current: &str) -> Option<Field> {
    if branches.is_empty() {
        return None;
    }
    let mut choices = vec![Choice::new(
        "",
        "The billed lines' branch, else your own",
        current,
    )];
    choices.extend(
        branches
            .iter()
            .filter(|b| !b.id.is_empty())
            .map(|b| Choice::new(b.id.as_str(), b.label.as_str(), current)),
    );
    Some(
        Field::select("branch_id", "Branch", choices)
            .prefixed("inv")
            .hint(
                "Only for an invoice that bills no received line: billed lines decide its branch.",
            ),
    )
}

/// The API's request for what the form sent, with the line ids and charge
/// kinds in the order sent (to put a refusal of `lines[i]` or
/// `charges[i]` beside its field).
fn request(
    sent: &Sent,
    supplier_id: Uuid,
    lines: &[BillableLine],
    any_branch: bool,
) -> Result<(InvoiceRequest, Vec<String>, Vec<&'static str>), Error> {
    let total_amount = forms::decimal("total_amount", &sent.get("total_amount"))?
        .ok_or_else(|| Error::validation("total_amount", "Enter the invoice's total."))?;
    let mut billed = Vec::new();
    let mut ids = Vec::new();
    let mut branch = None;
    for l in lines {
        let field = format!("bill-{}", l.id);
        let quantity = forms::decimal(&field, &l.bill).map_err(|_| {
            Error::validation(field.as_str(), "Enter the units billed as a whole number.")
        })?;
        let Some(quantity) = quantity.filter(|q| !q.is_zero()) else {
            continue;
        };
        let unit_cost = forms::decimal(&field, &l.price)
            .map_err(|_| Error::validation(field.as_str(), "The billed price must be a number."))?
            .unwrap_or(l.unit_cost);
        branch.get_or_insert(l.branch_id);
        ids.push(l.id.clone());
        billed.push(InvoiceLineRequest {
            goods_received_line_id: l.line_id,
            quantity,
            unit_cost,
        });
    }
    let mut charges = Vec::new();
    let mut kinds = Vec::new();
    for (kind, _) in CHARGES {
        if let Some(amount) = forms::decimal(kind, &sent.get(kind))? {
            kinds.push(kind);
            charges.push(ReceiptChargeRequest {
                kind: kind.to_owned(),
                amount,
            });
        }
    }
    let due = sent.get("due_date");
    let body = InvoiceRequest {
        supplier_id: Some(supplier_id),
        total_amount: Some(total_amount),
        // An admin's invoice goes on the branch of the receipts it bills,
        // else on the branch picked.
        branch_id: if any_branch {
            branch.or(optional_id("branch_id", Some(&sent.get("branch_id")))?)
        } else {
            None
        },
        invoice_no: Some(sent.get("invoice_no")),
        due_date: (!due.trim().is_empty()).then_some(due),
        notes: Some(sent.get("notes")),
        lines: (!billed.is_empty()).then_some(billed),
        charges: (!charges.is_empty()).then_some(charges),
    };
    Ok((body, ids, kinds))
}

/// A refusal naming `lines[i].…` or `charges[i].…` moved to the field of
/// the page that row came from.
fn located(e: &Error, ids: &[String], kinds: &[&str]) -> Notice {
    let mut notice = Notice::from_error(e);
    if let Some(field) = notice.field.clone() {
        if let Some(i) = forms::indexed(&field, "lines") {
            if let Some(id) = ids.get(i) {
                notice.field = Some(format!("bill-{id}"));
            }
        } else if let Some(i) = forms::indexed(&field, "charges") {
            if let Some(kind) = kinds.get(i) {
                notice.field = Some((*kind).to_owned());
            }
        }
    }
    notice
}

/// `POST /console/suppliers/{id}/invoices`.
pub async fn record(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManageSupplierInvoices)?;
    let supplier_id = path_id(&id, "Supplier")?;
    let sent = Sent::of(form);
    let client = state.pool.get().await?;
    let notes = suppliers::receipts(&client, &staff, supplier_id).await?;
    drop(client);
    let lines = billable(&notes, &sent, &Notice::default());
    let (ids, kinds, result) = match request(&sent, supplier_id, &lines, staff.caller.any_branch())
    {
        Ok((body, ids, kinds)) => {
            let made = invoices::record(&state.pool, &staff.caller.acting(), body).await;
            (ids, kinds, made)
        }
        Err(e) => (Vec::new(), Vec::new(), Err(e)),
    };
    match result {
        Ok(invoice) => Ok(see_other(&format!(
            "/console/suppliers/{supplier_id}?done=recorded#invoice-{}",
            invoice.id
        ))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let shown = Shown {
                notice: located(&e, &ids, &kinds),
                about: "record".to_owned(),
                sent,
            };
            suppliers::show(&state, &staff, &id, shown, code).await
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_row_goes_beside_its_field() {
        let ids = vec!["a".to_owned(), "b".to_owned()];
        let e = Error::validation("lines[1].quantity", "Too many.");
        assert_eq!(located(&e, &ids, &[]).field.as_deref(), Some("bill-b"));
        let e = Error::validation("charges[0].amount", "Not positive.");
        assert_eq!(
            located(&e, &ids, &["clearing"]).field.as_deref(),
            Some("clearing")
        );
        let e = Error::validation("total_amount", "Wrong.");
        assert_eq!(
            located(&e, &ids, &[]).field.as_deref(),
            Some("total_amount")
        );
    }
}
