//! Receiving a delivery against an order, on the order's page: the
//! supplier's delivery note number, per outstanding line the batch,
//! expiry, accepted and rejected units (with the reason) and the cost, and
//! the charges of getting it here (freight, insurance, clearing, other).
//! A scan box fills a line from a box's code: the code is read as
//! `GET /scan` reads it (a GS1 element string gives the GTIN, batch and
//! expiry), the order line of that product gets the batch and expiry and
//! one more accepted, and nothing is posted until *Receive and post*. The
//! note is made by `received::create` and posted on the branch's actor,
//! as `POST /goods-received` and `/goods-received/{id}/post` do.

use actix_web::http::StatusCode;
use actix_web::web;
use uuid::Uuid;

use super::buying::{show_order, visible_order};
use super::forms::{self, Field, Sent};
use super::{see_other, Notice, Outcome, Posted};
use crate::state::AppState;
use domain::buying::orders::PurchaseOrder;
use domain::buying::received::{
    self, GoodsReceivedRequest, PostNote, PostOptions, ReceiptChargeRequest, ReceivedLineRequest,
};
use domain::{scan, Action, Error};

/// The kinds of charge a delivery takes, with their labels.
const CHARGES: [(&str, &str); 4] = [
    ("freight", "Freight"),
    ("insurance", "Insurance"),
    ("clearing", "Clearing"),
    ("other", "Other charges"),
];

/// The delivery's charge fields, as sent, with a refusal beside its field.
pub fn charge_fields(sent: &Sent, notice: &Notice) -> Vec<Field> {
    let mut fields: Vec<Field> = CHARGES
        .iter()
        .map(|(kind, label)| Field::number(kind, label, &sent.get(kind)).prefixed("charge"))
        .collect();
    forms::place(&mut fields, notice);
    fields
}

/// The API's request for the delivery the form describes, and the charge
/// kinds in the order sent.
fn request(
    sent: &Sent,
    o: &PurchaseOrder,
) -> Result<(GoodsReceivedRequest, Vec<&'static str>), Error> {
    let mut lines = Vec::new();
    for l in &o.lines {
        let id = l.id.to_string();
        let get = |f: &str| sent.row(f, &id);
        let received = forms::decimal("quantity_received", &get("received"))?;
        let rejected = forms::decimal("quantity_rejected", &get("rejected"))?;
        if received.is_none() && rejected.is_none() {
            continue;
        }
        let expiry = forms::date("expiry_date", &get("expiry"))?.ok_or_else(|| {
            Error::validation(
                "expiry_date",
                format!(
                    "Enter the expiry date of the {} delivered.",
                    l.medicine_name
                ),
            )
        })?;
        let reason = get("reason");
        lines.push(ReceivedLineRequest {
            purchase_order_line_id: Some(l.id),
            medicine_id: l.medicine_id,
            pack_id: l.pack_id,
            batch_number: get("batch"),
            expiry_date: expiry,
            manufacturing_date: None,
            quantity_received: received.unwrap_or_default(),
            quantity_rejected: rejected,
            rejection_reason: (!reason.trim().is_empty()).then_some(reason),
            unit_cost: forms::decimal("unit_cost", &get("cost"))?.unwrap_or(l.unit_cost),
        });
    }
    if lines.is_empty() {
        return Err(Error::validation(
            "lines",
            "Enter what was delivered of at least one line.",
        ));
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
    let body = GoodsReceivedRequest {
        supplier_id: o.supplier_id,
        branch_id: Some(o.branch_id),
        purchase_order_id: Some(o.id),
        delivery_reference: sent.get("delivery_reference"),
        lines,
        charges,
    };
    Ok((body, kinds))
}

/// The order line a scanned product goes on: the line of that pack (or
/// of loose units when the code names the base unit), else the
/// medicine's only line.
fn line_for(o: &PurchaseOrder, medicine_id: Uuid, pack_id: Option<Uuid>) -> Option<Uuid> {
    let open = || {
        o.lines
            .iter()
            .filter(move |l| l.medicine_id == medicine_id && l.outstanding > 0)
    };
    open()
        .find(|l| l.pack_id == pack_id)
        .or_else(|| {
            let mut all = open();
            match (all.next(), all.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        })
        .map(|l| l.id)
}

/// Fills the form from the scan box: the line's batch and expiry from the
/// code, and one more accepted. The words of what was filled, or a
/// refusal naming `scan`.
async fn fill(state: &AppState, o: &PurchaseOrder, sent: &mut Sent) -> Result<String, Error> {
    let code = sent.get("scan").trim().to_owned();
    if code.is_empty() {
        return Err(Error::validation(
            "scan",
            "Scan a box's code (or type it) before pressing Enter; Receive and post sends the \
             delivery.",
        ));
    }
    let client = state.pool.get().await?;
    let named = scan::name(&client, &code, "scan").await?;
    let line = line_for(o, named.medicine_id, named.pack_id).ok_or_else(|| {
        Error::validation(
            "scan",
            "The code names a product with nothing outstanding on this order.",
        )
    })?;
    let Some(l) = o.lines.iter().find(|l| l.id == line) else {
        return Err(Error::validation(
            "scan",
            "The code names no line of this order.",
        ));
    };
    let id = l.id.to_string();
    let mut said = vec![l.medicine_name.clone()];
    if let Some(batch) = &named.batch_number {
        sent.set(&format!("batch-{id}"), batch.clone());
        said.push(format!("batch {batch}"));
    }
    if let Some(expiry) = named.expiry {
        sent.set(&format!("expiry-{id}"), expiry.to_string());
        said.push(format!("expiry {expiry}"));
    }
    let accepted = sent.row("received", &id).trim().parse::<i64>().unwrap_or(0) + 1;
    sent.set(&format!("received-{id}"), accepted.to_string());
    sent.set("scan", "");
    Ok(format!(
        "Scanned {}: {accepted} accepted so far. Scan the next box, or Receive and post.",
        said.join(", ")
    ))
}

/// A refusal naming `charges[i].…` moved beside that charge's field.
fn located(e: &Error, kinds: &[&str]) -> Notice {
    let mut notice = Notice::from_error(e);
    let index = notice
        .field
        .as_deref()
        .and_then(|f| forms::indexed(f, "charges"));
    if let Some(kind) = index.and_then(|i| kinds.get(i)) {
        notice.field = Some((*kind).to_owned());
    }
    notice
}

/// `POST /console/purchase-orders/{id}/receive`: the scan button (the
/// form's first, so Enter in any field scans) fills the form; any other
/// post (*Receive and post*) makes and posts the note.
pub async fn receive(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ReceiveGoods)?;
    let o = visible_order(&state, &staff, &id).await?;
    let mut sent = Sent::of(form);
    if sent.get("act") == "scan" {
        return match fill(&state, &o, &mut sent).await {
            Ok(said) => show_order(
                &staff,
                &o,
                Notice::done(said),
                sent,
                "receive",
                StatusCode::OK,
            ),
            Err(e @ (Error::Validation { .. } | Error::Coded { .. })) => {
                let code = actix_web::ResponseError::status_code(&e);
                show_order(&staff, &o, Notice::from_error(&e), sent, "receive", code)
            }
            Err(e) => Err(e.into()),
        };
    }
    let short_dated = sent.ticked("accept_short_dated");
    if short_dated && !Action::AcceptShortDated.permits(staff.role()) {
        return Err(Error::forbidden(
            "Only a branch manager, a pharmacist or an admin may accept short-dated stock.",
        )
        .into());
    }
    let mut kinds = Vec::new();
    let attempt = async {
        let branch_id = staff.caller.branch_scope(Some(o.branch_id))?;
        let (body, sent_kinds) = request(&sent, &o)?;
        kinds = sent_kinds;
        let note = body.validate(branch_id, staff.caller.user_id)?;
        let draft = received::create(&state.pool, note).await?;
        let command = PostNote {
            id: draft.id,
            options: PostOptions {
                allow_over_receipt: false,
                accept_short_dated: short_dated,
            },
            user_id: staff.caller.user_id,
        };
        match state.actors.branch(branch_id, command).await {
            Ok(posted) => Ok(posted),
            Err(e) => {
                // Refused as a whole: the draft made for it goes too, so
                // the next attempt starts clean.
                received::discard(&state.pool, draft.id, branch_id).await?;
                Err(e)
            }
        }
    };
    let result = attempt.await;
    match result {
        Ok(_) => Ok(see_other(&format!(
            "/console/purchase-orders/{}?done=received",
            o.id
        ))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            show_order(&staff, &o, located(&e, &kinds), sent, "receive", code)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_charge_goes_beside_its_kind() {
        let e = Error::validation("charges[1].amount", "Not positive.");
        assert_eq!(
            located(&e, &["freight", "other"]).field.as_deref(),
            Some("other")
        );
        let e = Error::validation("delivery_reference", "Enter it.");
        assert_eq!(
            located(&e, &["freight"]).field.as_deref(),
            Some("delivery_reference")
        );
    }
}
