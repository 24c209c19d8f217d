//! Buying: purchase orders (a draft from the reorder list, submit, approve
//! or reject, send, close, cancel) and receiving a delivery against an
//! order (a goods received note drafted and posted as one action, each
//! line with its batch, expiry, accepted and rejected units). Every step is
//! the API's own function: `orders::from_reorder`, `orders::move_order`,
//! `received::create` and the branch actor's `PostNote`, under the same
//! role checks as `/purchase-orders` and `/goods-received`. Receiving is
//! in [`super::delivery`], editing a draft's lines in
//! [`super::order_lines`]; both are forms of the order's page.

use actix_web::http::StatusCode;
use actix_web::web;
use askama::Template;
use serde::Deserialize;

use super::forms::{base_of, Choice, Pager, Sent};
use super::{
    branch_options, html_status, money, optional_id, see_other, when, BranchOption, Chrome,
    NoFields, Notice, Outcome, Posted, Staff,
};
use crate::state::AppState;
use domain::buying::orders::{self, FromReorderRequest, Move, PurchaseOrder};
use domain::input::path_id;
use domain::paging::PageParams;
use domain::suppliers::{self, Activity};
use domain::{Action, Error};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/purchase-orders", web::get().to(orders_page))
        .route(
            "/purchase-orders/from-reorder",
            web::post().to(from_reorder),
        )
        .route("/purchase-orders/{id}", web::get().to(order_page))
        .route(
            "/purchase-orders/{id}/receive",
            web::post().to(super::delivery::receive),
        )
        .route(
            "/purchase-orders/{id}/lines",
            web::post().to(super::order_lines::edit),
        )
        .route("/purchase-orders/{id}/{move}", web::post().to(move_order));
}

pub struct OrderRow {
    pub id: String,
    pub number: String,
    pub supplier: String,
    pub status: String,
    pub expected: String,
    pub lines: usize,
    pub total: String,
    pub created: String,
}

fn order_row(o: &PurchaseOrder) -> OrderRow {
    OrderRow {
        id: o.id.to_string(),
        number: o.po_number.clone(),
        supplier: o.supplier_name.clone(),
        status: o.status.replace('_', " "),
        expected: o.expected_date.map(|d| d.to_string()).unwrap_or_default(),
        lines: o.lines.len(),
        total: money(o.total),
        created: when(o.created_at),
    }
}

#[derive(Template)]
#[template(path = "console/purchase_orders.html")]
struct OrdersPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    statuses: Vec<Choice>,
    branches: Vec<BranchOption>,
    suppliers: Vec<Choice>,
    branch: String,
    can_draft: bool,
    rows: Vec<OrderRow>,
    pager: Pager,
}

#[derive(Debug, Default, Deserialize)]
pub struct OrdersQuery {
    pub status: Option<String>,
    pub branch_id: Option<String>,
    pub page: Option<i64>,
}

async fn supplier_choices<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    selected: &str,
) -> Result<Vec<Choice>, Error> {
    let page = PageParams {
        page: Some(1),
        page_size: Some(100),
    }
    .resolve(100)?;
    let (list, _) = suppliers::list(c, None, Activity::Active, page).await?;
    Ok(list
        .into_iter()
        .map(|s| Choice::new(s.id.to_string(), s.name, selected))
        .collect())
}

async fn orders_page(
    state: web::Data<AppState>,
    staff: Staff,
    q: web::Query<OrdersQuery>,
) -> Outcome {
    show_orders(&state, &staff, &q, Notice::default(), StatusCode::OK).await
}

async fn show_orders(
    state: &AppState,
    staff: &Staff,
    q: &OrdersQuery,
    notice: Notice,
    code: StatusCode,
) -> Outcome {
    staff.caller.require(Action::ReadPurchaseOrders)?;
    let requested = optional_id("branch_id", q.branch_id.as_deref())?;
    let branch_id = staff.caller.branch_filter(requested)?;
    let status = q
        .status
        .clone()
        .filter(|s| orders::STATUSES.contains(&s.as_str()));
    let page = PageParams {
        page: q.page,
        page_size: Some(orders::PAGE_SIZE),
    }
    .resolve(orders::PAGE_SIZE)?;
    let client = state.pool.get().await?;
    let filter = orders::ListFilter {
        branch_id,
        supplier_id: None,
        status: status.clone(),
    };
    let (items, total) = orders::list(&client, &filter, page).await?;
    let current = status.unwrap_or_default();
    let mut statuses = vec![Choice::new("", "Any status", &current)];
    statuses.extend(
        orders::STATUSES
            .iter()
            .map(|s| Choice::new(*s, s.replace('_', " "), &current)),
    );
    let branch_text = requested.map(|b| b.to_string()).unwrap_or_default();
    let base = base_of(
        "/console/purchase-orders",
        &[
            ("status", current.as_str()),
            ("branch_id", branch_text.as_str()),
        ],
    );
    html_status(
        code,
        &OrdersPage {
            chrome: Some(Chrome::new(staff, "/console/purchase-orders")),
            csrf: staff.csrf.clone(),
            notice,
            statuses,
            branches: branch_options(&client, staff, requested).await?,
            suppliers: supplier_choices(&client, "").await?,
            branch: branch_id.map(|b| b.to_string()).unwrap_or_default(),
            can_draft: Action::ManagePurchaseOrders.permits(staff.role()) && branch_id.is_some(),
            rows: items.iter().map(order_row).collect(),
            pager: Pager::new(&base, page, total),
        },
    )
}

#[derive(Debug, Default, Deserialize)]
pub struct ReorderForm {
    #[serde(default)]
    pub supplier_id: String,
    #[serde(default)]
    pub branch_id: String,
}

async fn from_reorder(state: web::Data<AppState>, posted: Posted<ReorderForm>) -> Outcome {
    let Posted { staff, form } = posted;
    staff.caller.require(Action::ManagePurchaseOrders)?;
    let attempt = async {
        let supplier_id = optional_id("supplier_id", Some(&form.supplier_id))?
            .ok_or_else(|| Error::validation("supplier_id", "Choose a supplier."))?;
        let body = FromReorderRequest {
            supplier_id,
            branch_id: optional_id("branch_id", Some(&form.branch_id))?,
        };
        orders::from_reorder(&state.pool, &staff.caller.acting(), body).await
    };
    match attempt.await {
        Ok(o) => Ok(see_other(&format!(
            "/console/purchase-orders/{}?done=drafted",
            o.id
        ))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            let q = OrdersQuery {
                branch_id: Some(form.branch_id.clone()),
                ..OrdersQuery::default()
            };
            show_orders(&state, &staff, &q, Notice::from_error(&e), code).await
        }
        Err(e) => Err(e.into()),
    }
}

pub struct LineRow {
    pub id: String,
    pub medicine_id: String,
    pub medicine: String,
    pub pack: String,
    pub pack_id: String,
    pub ordered: i32,
    pub received: i32,
    pub rejected: i32,
    pub outstanding: i32,
    /// Outstanding in what the line counts (packs for a pack line).
    pub outstanding_counted: i32,
    pub unit_cost: String,
    pub total: String,
    /// The edit form's quantity (in what the line counts) and cost: as
    /// sent when the edit was refused, else the line's.
    pub edit_quantity: String,
    pub edit_cost: String,
    pub remove: bool,
    pub edit_error: Option<String>,
}

/// A move's button: its route name, label and whether the role has it.
pub struct MoveButton {
    pub name: &'static str,
    pub label: &'static str,
    pub danger: bool,
}

#[derive(Template)]
#[template(path = "console/purchase_order.html")]
struct OrderPage {
    chrome: Option<Chrome>,
    csrf: String,
    notice: Notice,
    id: String,
    number: String,
    supplier: String,
    status: String,
    expected: String,
    notes: String,
    total: String,
    created: String,
    lines: Vec<LineRow>,
    moves: Vec<MoveButton>,
    can_receive: bool,
    can_edit: bool,
    /// What the refused form sent (`about` names it: `lines`, `receive`).
    sent: Sent,
    about: String,
    /// The edit form's new line and the charges of a delivery, with the
    /// refusal beside their field.
    add_error: Option<String>,
    charges: Vec<super::forms::Field>,
}

#[derive(Debug, Default, Deserialize)]
pub struct OrderQuery {
    pub done: Option<String>,
}

pub(super) async fn visible_order(
    state: &AppState,
    staff: &Staff,
    raw: &str,
) -> Result<PurchaseOrder, Error> {
    staff.caller.require(Action::ReadPurchaseOrders)?;
    let id = path_id(raw, "Purchase order")?;
    let client = state.pool.get().await?;
    orders::get(&client, id)
        .await?
        .filter(|o| staff.caller.can_see_branch(o.branch_id))
        .ok_or_else(|| Error::not_found("Purchase order not found"))
}

fn action_of(mv: Move) -> Action {
    match mv {
        Move::Approve | Move::Reject => Action::ApprovePurchaseOrders,
        _ => Action::ManagePurchaseOrders,
    }
}

fn move_named(name: &str) -> Option<Move> {
    [
        Move::Submit,
        Move::Approve,
        Move::Reject,
        Move::Send,
        Move::Close,
        Move::Cancel,
    ]
    .into_iter()
    .find(|m| m.name() == name)
}

pub(super) fn show_order(
    staff: &Staff,
    o: &PurchaseOrder,
    notice: Notice,
    sent: Sent,
    about: &str,
    code: StatusCode,
) -> Outcome {
    let role = staff.role();
    let editing = about == "lines";
    let quiet = Notice::default();
    let for_receipt = if about == "receive" { &notice } else { &quiet };
    let charges = super::delivery::charge_fields(&sent, for_receipt);
    let moves = [
        (Move::Submit, "Submit for approval", false),
        (Move::Approve, "Approve", false),
        (Move::Reject, "Reject (back to draft)", true),
        (Move::Send, "Mark as sent to the supplier", false),
        (Move::Close, "Close (nothing more is coming)", true),
        (Move::Cancel, "Cancel the order", true),
    ]
    .into_iter()
    .filter(|(m, _, _)| m.from().contains(&o.status.as_str()) && action_of(*m).permits(role))
    .map(|(m, label, danger)| MoveButton {
        name: m.name(),
        label,
        danger,
    })
    .collect();
    let receivable = ["sent", "partially_received"].contains(&o.status.as_str());
    let add_error = if editing {
        notice.for_field("add").map(str::to_owned)
    } else {
        None
    };
    let lines: Vec<LineRow> = o
        .lines
        .iter()
        .map(|l| LineRow {
            edit_quantity: if editing {
                sent.row("qty", &l.id.to_string())
            } else if l.pack_id.is_some() {
                l.packs_ordered.to_string()
            } else {
                l.quantity_ordered.to_string()
            },
            edit_cost: if editing {
                sent.row("cost", &l.id.to_string())
            } else {
                l.unit_cost.normalize().to_string()
            },
            remove: editing && sent.ticked(&format!("remove-{}", l.id)),
            edit_error: if editing {
                notice
                    .for_field(&format!("qty-{}", l.id))
                    .map(str::to_owned)
            } else {
                None
            },
            id: l.id.to_string(),
            medicine_id: l.medicine_id.to_string(),
            medicine: l.medicine_name.clone(),
            pack: if l.pack_id.is_some() {
                format!("packs of {}", l.pack_units)
            } else {
                "units".to_owned()
            },
            pack_id: l.pack_id.map(|p| p.to_string()).unwrap_or_default(),
            ordered: l.quantity_ordered,
            received: l.quantity_received,
            rejected: l.quantity_rejected,
            outstanding: l.outstanding,
            outstanding_counted: l.outstanding / l.pack_units.max(1),
            unit_cost: l.unit_cost.normalize().to_string(),
            total: money(l.line_total),
        })
        .collect();
    html_status(
        code,
        &OrderPage {
            chrome: Some(Chrome::new(staff, "/console/purchase-orders")),
            csrf: staff.csrf.clone(),
            notice,
            id: o.id.to_string(),
            number: o.po_number.clone(),
            supplier: o.supplier_name.clone(),
            status: o.status.replace('_', " "),
            expected: o.expected_date.map(|d| d.to_string()).unwrap_or_default(),
            notes: o.notes.clone(),
            total: money(o.total),
            created: format!("{} by {}", when(o.created_at), o.created_by_name),
            lines,
            moves,
            can_receive: receivable && Action::ReceiveGoods.permits(role),
            can_edit: o.status == "draft" && Action::ManagePurchaseOrders.permits(role),
            sent,
            about: about.to_owned(),
            add_error,
            charges,
        },
    )
}

async fn order_page(
    state: web::Data<AppState>,
    staff: Staff,
    id: web::Path<String>,
    q: web::Query<OrderQuery>,
) -> Outcome {
    let o = visible_order(&state, &staff, &id).await?;
    let notice = match q.done.as_deref() {
        Some("drafted") => Notice::done("A draft order was made from the reorder list."),
        Some("received") => Notice::done("The delivery was received: its batches are in stock."),
        Some("edited") => Notice::done("The order's lines were saved."),
        Some(m) if move_named(m).is_some() => {
            Notice::done(format!("The order is now {}.", o.status.replace('_', " ")))
        }
        _ => Notice::default(),
    };
    show_order(&staff, &o, notice, Sent::default(), "", StatusCode::OK)
}

async fn move_order(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    posted: Posted<NoFields>,
) -> Outcome {
    let staff = posted.staff;
    let (raw, name) = path.into_inner();
    let mv = move_named(&name)
        .ok_or_else(|| Error::not_found("There is no such page in the console."))?;
    staff.caller.require(action_of(mv))?;
    let o = visible_order(&state, &staff, &raw).await?;
    match orders::move_order(&state.pool, &staff.caller.acting(), o.id, mv).await {
        Ok(_) => Ok(see_other(&format!(
            "/console/purchase-orders/{}?done={}",
            o.id,
            mv.name()
        ))),
        Err(e @ (Error::Validation { .. } | Error::Coded { .. } | Error::Conflict(_))) => {
            let code = actix_web::ResponseError::status_code(&e);
            show_order(
                &staff,
                &o,
                Notice::from_error(&e),
                Sent::default(),
                "",
                code,
            )
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_move_has_its_route_name() {
        for name in ["submit", "approve", "reject", "send", "close", "cancel"] {
            assert_eq!(move_named(name).map(Move::name), Some(name));
        }
        assert!(move_named("receive").is_none());
        assert_eq!(action_of(Move::Approve), Action::ApprovePurchaseOrders);
    }
}
