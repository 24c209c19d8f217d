//! Reading goods received notes: one with its lines and charges, and the
//! paged list (newest first).

use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use tokio_postgres::Row;
use uuid::Uuid;

use super::{Charge, GoodsReceivedLine, GoodsReceivedNote};
use crate::db;
use crate::error::Result;
use crate::paging::{self, Page};
use crate::tables::Table;

const NOTE_COLUMNS: [&str; 18] = [
    "id",
    "grn_number",
    "status",
    "supplier_id",
    "branch_id",
    "purchase_order_id",
    "delivery_reference",
    "lines_total",
    "charges_total",
    "total",
    "allow_over_receipt",
    "accept_short_dated",
    "created_by",
    "created_at",
    "posted_by",
    "posted_at",
    "updated_at",
    "origin",
];

/// Which notes a list shows.
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub supplier_id: Option<Uuid>,
    pub purchase_order_id: Option<Uuid>,
    /// `draft` or `posted`.
    pub status: Option<String>,
}

/// One note with its lines and charges, or `None`.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<GoodsReceivedNote>> {
    let mut notes = select(c, |q| {
        q.and_where(Expr::col(("n", "id")).eq(id));
    })
    .await?;
    Ok(notes.pop())
}

/// A page of notes, newest first, and how many the filter selects.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Page,
) -> Result<(Vec<GoodsReceivedNote>, i64)> {
    let filter = |q: &mut SelectStatement| {
        if let Some(b) = f.branch_id {
            q.and_where(Expr::col(("n", "branch_id")).eq(b));
        }
        if let Some(s) = f.supplier_id {
            q.and_where(Expr::col(("n", "supplier_id")).eq(s));
        }
        if let Some(o) = f.purchase_order_id {
            q.and_where(Expr::col(("n", "purchase_order_id")).eq(o));
        }
        if let Some(s) = &f.status {
            q.and_where(Expr::col(("n", "status")).eq(s.as_str()));
        }
    };
    let mut counted = Query::select()
        .from_as(Table::GoodsReceivedNotes, "n")
        .to_owned();
    filter(&mut counted);
    let total = paging::count(c, &counted, ("n", "id")).await?;
    let items = select(c, |q| {
        filter(q);
        q.order_by(("n", "created_at"), Order::Desc)
            .order_by(("n", "id"), Order::Desc);
        paging::Slice::apply(&page, q);
    })
    .await?;
    Ok((items, total))
}

/// The notes `shape` selects, each with its lines and charges (three
/// statements whatever the number of notes).
async fn select<C: GenericClient + Sync>(
    c: &C,
    shape: impl FnOnce(&mut SelectStatement),
) -> Result<Vec<GoodsReceivedNote>> {
    let mut q = Query::select()
        .columns(NOTE_COLUMNS.map(|col| ("n", col)))
        .expr_as(Expr::col(("s", "name")), "supplier_name")
        .from_as(Table::GoodsReceivedNotes, "n")
        .join_as(
            JoinType::InnerJoin,
            Table::Suppliers,
            "s",
            Expr::col(("s", "id")).equals(("n", "supplier_id")),
        )
        .to_owned();
    shape(&mut q);
    let rows = db::fetch_all(c, &q).await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.get("id")).collect();
    let mut notes: Vec<GoodsReceivedNote> = rows.iter().map(note).collect();
    if notes.is_empty() {
        return Ok(notes);
    }
    let lines = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT l.*, m.name AS medicine_name FROM goods_received_lines l
             JOIN medicines m ON m.id = l.medicine_id
            WHERE l.note_id = ANY({ids}) ORDER BY l.note_id, l.line_no"#
    );
    for r in db::raw_all(c, &lines.sql, lines.values).await? {
        let owner: Uuid = r.get("note_id");
        if let Some(n) = notes.iter_mut().find(|n| n.id == owner) {
            n.lines.push(line(&r));
        }
    }
    let charges = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT note_id, kind, amount FROM goods_received_charges
            WHERE note_id = ANY({ids}) ORDER BY note_id, line_no"#
    );
    for r in db::raw_all(c, &charges.sql, charges.values).await? {
        let owner: Uuid = r.get(0);
        if let Some(n) = notes.iter_mut().find(|n| n.id == owner) {
            n.charges.push(Charge {
                kind: r.get(1),
                amount: r.get(2),
            });
        }
    }
    Ok(notes)
}

fn note(r: &Row) -> GoodsReceivedNote {
    GoodsReceivedNote {
        id: r.get("id"),
        grn_number: r.get("grn_number"),
        status: r.get("status"),
        supplier_id: r.get("supplier_id"),
        supplier_name: r.get("supplier_name"),
        branch_id: r.get("branch_id"),
        purchase_order_id: r.get("purchase_order_id"),
        delivery_reference: r.get("delivery_reference"),
        origin: r.get("origin"),
        lines: Vec::new(),
        charges: Vec::new(),
        lines_total: r.get("lines_total"),
        charges_total: r.get("charges_total"),
        total: r.get("total"),
        allow_over_receipt: r.get("allow_over_receipt"),
        accept_short_dated: r.get("accept_short_dated"),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
        posted_by: r.get("posted_by"),
        posted_at: r.get("posted_at"),
        updated_at: r.get("updated_at"),
    }
}

fn line(r: &Row) -> GoodsReceivedLine {
    GoodsReceivedLine {
        id: r.get("id"),
        line_no: r.get("line_no"),
        purchase_order_line_id: r.get("purchase_order_line_id"),
        medicine_id: r.get("medicine_id"),
        medicine_name: r.get("medicine_name"),
        pack_id: r.get("pack_id"),
        pack_units: r.get("pack_units"),
        batch_number: r.get("batch_number"),
        expiry_date: r.get("expiry_date"),
        manufacturing_date: r.get("manufacturing_date"),
        quantity_received: r.get("quantity_received"),
        quantity_rejected: r.get("quantity_rejected"),
        rejection_reason: r.get("rejection_reason"),
        unit_cost: r.get("unit_cost"),
        line_value: r.get("line_value"),
        charge_share: r.get("charge_share"),
        landed_total: r.get("landed_total"),
        landed_unit_cost: r.get("landed_unit_cost"),
        batch_id: r.get("batch_id"),
        quantity_invoiced: r.get("quantity_invoiced"),
    }
}
