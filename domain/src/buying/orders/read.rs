//! Reading purchase orders: one with its lines, and the paged list.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use tokio_postgres::Row;
use uuid::Uuid;

use super::{PurchaseOrder, PurchaseOrderLine, CANCELLED, CLOSED};
use crate::db;
use crate::error::Result;
use crate::paging::{self, Page};
use crate::tables::Table;

/// Orders joined with the names the shape carries (FROM, joins).
fn from() -> SelectStatement {
    Query::select()
        .from_as(Table::PurchaseOrders, "po")
        .join_as(
            JoinType::InnerJoin,
            Table::Suppliers,
            "s",
            Expr::col(("s", "id")).equals(("po", "supplier_id")),
        )
        .join_as(
            JoinType::InnerJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("po", "created_by")),
        )
        .to_owned()
}

fn shape(q: &mut SelectStatement) {
    q.columns(
        [
            "id",
            "po_number",
            "branch_id",
            "supplier_id",
            "status",
            "expected_date",
            "notes",
            "total",
            "created_by",
            "submitted_by",
            "approved_by",
            "created_at",
            "updated_at",
        ]
        .map(|c| ("po", c)),
    )
    .expr_as(Expr::col(("s", "name")), "supplier_name")
    .expr_as(Expr::col(("u", "full_name")), "created_by_name");
}

fn header(r: &Row) -> PurchaseOrder {
    PurchaseOrder {
        id: r.get("id"),
        po_number: r.get("po_number"),
        branch_id: r.get("branch_id"),
        supplier_id: r.get("supplier_id"),
        supplier_name: r.get("supplier_name"),
        status: r.get("status"),
        expected_date: r.get("expected_date"),
        notes: r.get("notes"),
        lines: Vec::new(),
        total: r.get("total"),
        created_by: r.get("created_by"),
        created_by_name: r.get("created_by_name"),
        submitted_by: r.get("submitted_by"),
        approved_by: r.get("approved_by"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
    }
}

/// The lines of `orders`, each list in line order.
async fn lines<C: GenericClient + Sync>(c: &C, orders: &mut [PurchaseOrder]) -> Result<()> {
    if orders.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = orders.iter().map(|o| o.id).collect();
    let q = Query::select()
        .columns(
            [
                "id",
                "purchase_order_id",
                "line_no",
                "medicine_id",
                "pack_id",
                "pack_units",
                "quantity_ordered",
                "quantity_received",
                "quantity_rejected",
                "quantity_invoiced",
                "unit_cost",
                "line_total",
            ]
            .map(|c| ("l", c)),
        )
        .expr_as(Expr::col(("m", "name")), "medicine_name")
        .from_as(Table::PurchaseOrderLines, "l")
        .join_as(
            JoinType::InnerJoin,
            Table::Medicines,
            "m",
            Expr::col(("m", "id")).equals(("l", "medicine_id")),
        )
        .and_where(Expr::col(("l", "purchase_order_id")).is_in(ids))
        .order_by(("l", "purchase_order_id"), Order::Asc)
        .order_by(("l", "line_no"), Order::Asc)
        .to_owned();
    let mut by_order: HashMap<Uuid, Vec<PurchaseOrderLine>> = HashMap::new();
    let ended: HashMap<Uuid, bool> = orders
        .iter()
        .map(|o| (o.id, o.status == CLOSED || o.status == CANCELLED))
        .collect();
    for r in db::fetch_all(c, &q).await? {
        let order: Uuid = r.get("purchase_order_id");
        let ordered: i32 = r.get("quantity_ordered");
        let received: i32 = r.get("quantity_received");
        let pack_units: i32 = r.get("pack_units");
        let outstanding = if ended.get(&order).copied().unwrap_or(false) {
            0
        } else {
            Ord::max(ordered - received, 0)
        };
        by_order.entry(order).or_default().push(PurchaseOrderLine {
            id: r.get("id"),
            line_no: r.get("line_no"),
            medicine_id: r.get("medicine_id"),
            medicine_name: r.get("medicine_name"),
            pack_id: r.get("pack_id"),
            pack_units,
            packs_ordered: ordered / Ord::max(pack_units, 1),
            quantity_ordered: ordered,
            quantity_received: received,
            quantity_rejected: r.get("quantity_rejected"),
            quantity_invoiced: r.get("quantity_invoiced"),
            outstanding,
            unit_cost: r.get("unit_cost"),
            line_total: r.get("line_total"),
        });
    }
    for o in orders.iter_mut() {
        o.lines = by_order.remove(&o.id).unwrap_or_default();
    }
    Ok(())
}

/// One order with its lines, whatever its branch (the caller checks who
/// may see it).
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<PurchaseOrder>> {
    let mut q = from();
    shape(&mut q);
    q.and_where(Expr::col(("po", "id")).eq(id));
    let Some(row) = db::fetch_opt(c, &q).await? else {
        return Ok(None);
    };
    let mut orders = [header(&row)];
    lines(c, &mut orders).await?;
    let [order] = orders;
    Ok(Some(order))
}

/// What `GET /purchase-orders` filters on.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// `None`: every branch (an admin who named none).
    pub branch_id: Option<Uuid>,
    pub supplier_id: Option<Uuid>,
    pub status: Option<String>,
}

/// Orders newest first, a page of them with their lines, and how many the
/// filter selects.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<PurchaseOrder>, i64)> {
    let q = from()
        .apply_if(f.branch_id, |q, b| {
            q.and_where(Expr::col(("po", "branch_id")).eq(b));
        })
        .apply_if(f.supplier_id, |q, s| {
            q.and_where(Expr::col(("po", "supplier_id")).eq(s));
        })
        .apply_if(f.status.clone(), |q, s| {
            q.and_where(Expr::col(("po", "status")).eq(s));
        })
        .to_owned();
    let (rows, total) = paging::fetch(c, q, ("po", "id"), page, |q| {
        shape(q);
        q.order_by(("po", "created_at"), Order::Desc)
            .order_by(("po", "id"), Order::Desc);
    })
    .await?;
    let mut orders: Vec<PurchaseOrder> = rows.iter().map(header).collect();
    lines(c, &mut orders).await?;
    Ok((orders, total))
}
