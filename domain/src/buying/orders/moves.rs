//! The moves of a purchase order between its states, each in one
//! transaction under the order's row lock.

use chrono::Utc;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query};
use serde_json::json;
use uuid::Uuid;

use super::write::{lock, read_back};
use super::{
    PurchaseOrder, APPROVED, CANCELLED, CLOSED, DRAFT, PARTIALLY_RECEIVED, SENT, SUBMITTED,
};
use crate::acting::Acting;
use crate::audit;
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::tables::Table;

/// A move between states (`POST /purchase-orders/{id}/<move>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    Submit,
    Approve,
    Reject,
    Send,
    Close,
    Cancel,
}

impl Move {
    /// The move as its route names it.
    pub fn name(self) -> &'static str {
        match self {
            Move::Submit => "submit",
            Move::Approve => "approve",
            Move::Reject => "reject",
            Move::Send => "send",
            Move::Close => "close",
            Move::Cancel => "cancel",
        }
    }

    /// The states the move starts from.
    pub fn from(self) -> &'static [&'static str] {
        match self {
            Move::Submit => &[DRAFT],
            Move::Approve | Move::Reject => &[SUBMITTED],
            Move::Send => &[APPROVED],
            Move::Close => &[PARTIALLY_RECEIVED],
            Move::Cancel => &[DRAFT, SUBMITTED, APPROVED, SENT],
        }
    }

    /// The state the move ends in.
    pub fn to(self) -> &'static str {
        match self {
            Move::Submit => SUBMITTED,
            Move::Approve => APPROVED,
            Move::Reject => DRAFT,
            Move::Send => SENT,
            Move::Close => CLOSED,
            Move::Cancel => CANCELLED,
        }
    }

    /// Whether the audit log records it (the decisions and the ends).
    fn audited(self) -> bool {
        matches!(
            self,
            Move::Approve | Move::Reject | Move::Close | Move::Cancel
        )
    }
}

/// Whether any goods were delivered against the order (received or
/// rejected), read under the order's lock.
async fn delivered<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<bool> {
    let q = Query::select()
        .expr(Expr::cust("1"))
        .from(Table::PurchaseOrderLines)
        .and_where(Expr::col("purchase_order_id").eq(id))
        .and_where(
            Expr::col("quantity_received")
                .gt(0)
                .or(Expr::col("quantity_rejected").gt(0)),
        )
        .limit(1)
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.is_some())
}

/// Moves an order from its state, under its row lock: 404 when the caller
/// cannot see it, 409 naming the state when the move does not start from
/// it, 403 when the submitter decides on its own submission. The caller
/// checked the role the move needs.
pub async fn move_order(pool: &Pool, acting: &Acting, id: Uuid, mv: Move) -> Result<PurchaseOrder> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let locked = lock(&tx, acting, id).await?;
    if !mv.from().contains(&locked.status.as_str()) {
        return Err(Error::conflict(format!(
            "This purchase order is {}; `{}` applies only to an order that is {}.",
            locked.status,
            mv.name(),
            mv.from().join(" or ")
        )));
    }
    if matches!(mv, Move::Approve | Move::Reject) && locked.submitted_by == Some(acting.user_id) {
        return Err(Error::forbidden(
            "You submitted this order: another manager must approve or reject it.",
        ));
    }
    if mv == Move::Cancel && delivered(&tx, id).await? {
        return Err(Error::conflict(
            "Goods were already delivered against this order: close it instead of cancelling.",
        ));
    }
    let mut q = Query::update()
        .table(Table::PurchaseOrders)
        .value("status", mv.to())
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    match mv {
        Move::Submit => {
            q.value("submitted_by", acting.user_id);
        }
        Move::Approve => {
            q.value("approved_by", acting.user_id);
        }
        Move::Reject => {
            q.value("submitted_by", None::<Uuid>);
        }
        Move::Send | Move::Close | Move::Cancel => {}
    }
    db::execute(&tx, &q).await?;
    if mv.audited() {
        audit::write_for(
            &tx,
            Some(locked.branch_id),
            audit::Entry {
                actor_id: Some(acting.user_id),
                action: match mv {
                    Move::Approve => "purchase_order.approve",
                    Move::Reject => "purchase_order.reject",
                    Move::Close => "purchase_order.close",
                    _ => "purchase_order.cancel",
                },
                entity_type: "purchase_order",
                entity_id: id.to_string(),
                before: Some(json!({"status": locked.status, "po_number": locked.po_number})),
                after: Some(json!({"status": mv.to(), "po_number": locked.po_number})),
            },
        )
        .await?;
    }
    let moved = read_back(&tx, id).await?;
    crate::db::commit(tx).await?;
    Ok(moved)
}
