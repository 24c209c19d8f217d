//! Editing a draft purchase order's lines on its page before it is
//! submitted: each line's quantity and cost changed or the line removed,
//! and a line added (the medicine by scan or name). The whole order is
//! then replaced by the same `orders::replace` as `PUT /purchase-orders/{id}`,
//! after the same role check, so the API's rules (a draft only, each
//! medicine and pack once, at least one line) hold as they do there.

use actix_web::web;
use rust_decimal::Decimal;

use super::buying::{show_order, visible_order};
use super::counter::{lookup, Found};
use super::forms::{self, Sent};
use super::{see_other, Notice, Outcome, Posted};
use crate::state::AppState;
use domain::buying::orders::{self, PurchaseOrder, PurchaseOrderLineRequest, PurchaseOrderRequest};
use domain::{Action, Error};

/// A whole quantity or a cost of the form, refused beside `field`.
fn number(field: &str, text: &str, what: &str) -> Result<Option<Decimal>, Error> {
    forms::decimal(field, text)
        .map_err(|_| Error::validation(field, format!("The {what} must be a number.")))
}

/// The order's lines as the form leaves them (removed ones out, changed
/// ones changed), with the field each came from, in order.
fn kept(
    sent: &Sent,
    o: &PurchaseOrder,
) -> Result<(Vec<PurchaseOrderLineRequest>, Vec<String>), Error> {
    let mut lines = Vec::new();
    let mut fields = Vec::new();
    for l in &o.lines {
        let id = l.id.to_string();
        if sent.ticked(&format!("remove-{id}")) {
            continue;
        }
        let field = format!("qty-{id}");
        let quantity = number(&field, &sent.row("qty", &id), "quantity")?.ok_or_else(|| {
            Error::validation(
                field.as_str(),
                "Enter the quantity, or tick Remove to take the line off.",
            )
        })?;
        let unit_cost = number(&field, &sent.row("cost", &id), "cost")?.unwrap_or(l.unit_cost);
        lines.push(PurchaseOrderLineRequest {
            medicine_id: l.medicine_id,
            quantity,
            unit_cost,
            pack_id: l.pack_id,
        });
        fields.push(field);
    }
    Ok((lines, fields))
}

/// The line the add box names, if anything was typed there.
async fn added(
    state: &AppState,
    sent: &Sent,
    o: &PurchaseOrder,
) -> Result<Option<PurchaseOrderLineRequest>, Error> {
    let text = sent.get("add").trim().to_owned();
    if text.is_empty() {
        return Ok(None);
    }
    let client = state.pool.get().await?;
    let (medicine_id, pack_id) = match lookup(&client, &text, o.branch_id, "add").await? {
        Found::Scanned(named) => (named.medicine_id, named.pack_id),
        Found::One(m) => (m.id, None),
        Found::Many(found) => {
            let names: Vec<String> = found.iter().map(|m| m.name.clone()).collect();
            return Err(Error::validation(
                "add",
                format!(
                    "{} medicines match ({}): type more of the name, or scan it.",
                    found.len(),
                    names.join(", ")
                ),
            ));
        }
    };
    let quantity = number("add", &sent.get("add_quantity"), "quantity")?
        .ok_or_else(|| Error::validation("add", "Enter the quantity of the new line."))?;
    let unit_cost = number("add", &sent.get("add_cost"), "cost")?
        .ok_or_else(|| Error::validation("add", "Enter the cost of one of the new line."))?;
    Ok(Some(PurchaseOrderLineRequest {
        medicine_id,
        quantity,
        unit_cost,
        pack_id,
    }))
}

/// A refusal naming `lines[i].…` moved beside the field that line came
/// from (the add box for the new one).
fn located(e: &Error, fields: &[String]) -> Notice {
    let mut notice = Notice::from_error(e);
    let index = notice
        .field
        .as_deref()
        .and_then(|f| forms::indexed(f, "lines"));
    if let Some(field) = index.and_then(|i| fields.get(i)) {
        notice.field = Some(field.clone());
    }
    notice
}

/// `POST /console/purchase-orders/{id}/lines`.
pub async fn edit(
    state: web::Data<AppState>,
    id: web::Path<String>,
    posted: Posted<Vec<(String, String)>>,
) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManagePurchaseOrders)?;
    let o = visible_order(&state, &staff, &id).await?;
    let sent = Sent::of(form);
    let mut fields: Vec<String> = Vec::new();
    let attempt = async {
        let (mut lines, kept_fields) = kept(&sent, &o)?;
        fields = kept_fields;
        if let Some(line) = added(&state, &sent, &o).await? {
            lines.push(line);
            fields.push("add".to_owned());
        }
        if lines.is_empty() {
            return Err(Error::validation(
                "add",
                "An order keeps at least one line: cancel the order instead of removing them all.",
            ));
        }
        let body = PurchaseOrderRequest {
            supplier_id: o.supplier_id,
            branch_id: None,
            expected_date: o.expected_date,
            notes: Some(o.notes.clone()),
            lines,
        };
        orders::replace(&state.pool, &staff.caller.acting(), o.id, body).await
    };
    let result = attempt.await;
    match result {
        Ok(_) => Ok(see_other(&format!(
            "/console/purchase-orders/{}?done=edited",
            o.id
        ))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            show_order(&staff, &o, located(&e, &fields), sent, "lines", code)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_line_goes_beside_its_field_or_the_add_box() {
        let fields = vec!["qty-7".to_owned(), "add".to_owned()];
        let e = Error::validation("lines[0].quantity", "Not whole.");
        assert_eq!(located(&e, &fields).field.as_deref(), Some("qty-7"));
        let e = Error::validation("lines[1].medicine_id", "Twice.");
        assert_eq!(located(&e, &fields).field.as_deref(), Some("add"));
        let e = Error::validation("supplier_id", "Gone.");
        assert_eq!(located(&e, &fields).field.as_deref(), Some("supplier_id"));
    }
}
