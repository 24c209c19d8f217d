//! Writing purchase orders: create (numbered from the branch's counter)
//! and replace a draft, each in one transaction; the lock the moves and
//! the replace take on the order row.

use chrono::Utc;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, LockType, OnConflict, Query};
use uuid::Uuid;

use super::request::{NewLine, NewOrder};
use super::{get, PurchaseOrder, PurchaseOrderRequest, DRAFT};
use crate::acting::Acting;
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::tables::Table;
use crate::{input, packs, wire};

/// A line as stored: base units, its pack, its cost and total.
struct Priced {
    medicine_id: Uuid,
    pack_id: Option<Uuid>,
    pack_units: i32,
    base_quantity: i32,
    unit_cost: Decimal,
    line_total: Decimal,
}

/// Whether a live row of `table` has this id.
pub(super) async fn live<C: GenericClient + Sync>(tx: &C, table: Table, id: Uuid) -> Result<bool> {
    let q = Query::select()
        .expr(Expr::cust("1"))
        .from(table)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.is_some())
}

/// Checks the supplier, each line's medicine and pack (400 naming the
/// field) and prices the lines; the order's total last.
async fn priced<C: GenericClient + Sync>(
    tx: &C,
    supplier_id: Uuid,
    lines: &[NewLine],
) -> Result<(Vec<Priced>, Decimal)> {
    if !live(tx, Table::Suppliers, supplier_id).await? {
        return Err(Error::validation(
            "supplier_id",
            "`supplier_id` names no supplier.",
        ));
    }
    let mut out = Vec::with_capacity(lines.len());
    let mut total = Decimal::ZERO;
    for (i, l) in lines.iter().enumerate() {
        if !live(tx, Table::Medicines, l.medicine_id).await? {
            return Err(Error::validation(
                format!("lines[{i}].medicine_id"),
                format!("`lines[{i}].medicine_id` names no medicine."),
            ));
        }
        let pack_units = match l.pack_id {
            None => 1,
            Some(pack_id) => {
                packs::get(tx, l.medicine_id, pack_id)
                    .await?
                    .filter(|p| p.is_active)
                    .ok_or_else(|| {
                        Error::validation(
                            format!("lines[{i}].pack_id"),
                            format!("`lines[{i}].pack_id` names no active pack of the medicine."),
                        )
                    })?
                    .units
            }
        };
        let base = i64::from(l.quantity) * i64::from(pack_units);
        if base > input::MAX_QUANTITY {
            return Err(Error::validation(
                format!("lines[{i}].quantity"),
                format!(
                    "{} packs of {pack_units} are {base} base units; one line takes at most {}.",
                    l.quantity,
                    input::MAX_QUANTITY
                ),
            ));
        }
        let line_total = wire::two_places(Decimal::from(l.quantity) * l.unit_cost);
        total += line_total;
        if total >= Decimal::from(input::MAX_AMOUNT) {
            return Err(Error::validation(
                format!("lines[{i}].unit_cost"),
                format!("The order must cost less than {}.", input::MAX_AMOUNT),
            ));
        }
        out.push(Priced {
            medicine_id: l.medicine_id,
            pack_id: l.pack_id,
            pack_units,
            base_quantity: base as i32,
            unit_cost: l.unit_cost,
            line_total,
        });
    }
    Ok((out, total))
}

async fn insert_lines<C: GenericClient + Sync>(
    tx: &C,
    order: Uuid,
    lines: &[Priced],
) -> Result<()> {
    let mut q = Query::insert()
        .into_table(Table::PurchaseOrderLines)
        .columns([
            "id",
            "purchase_order_id",
            "line_no",
            "medicine_id",
            "pack_id",
            "pack_units",
            "quantity_ordered",
            "unit_cost",
            "line_total",
        ])
        .to_owned();
    for (i, l) in lines.iter().enumerate() {
        q.values_panic([
            Uuid::now_v7().into(),
            order.into(),
            (i as i32 + 1).into(),
            l.medicine_id.into(),
            l.pack_id.into(),
            l.pack_units.into(),
            l.base_quantity.into(),
            l.unit_cost.into(),
            l.line_total.into(),
        ]);
    }
    db::execute(tx, &q).await?;
    Ok(())
}

/// The branch's next order number: its counter row bumped in `tx`, which
/// holds the row until it commits, so numbers are gapless and unique.
async fn next_number<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<(i64, String)> {
    let code = Query::select()
        .column("code")
        .from(Table::Branches)
        .and_where(Expr::col("id").eq(branch_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    let code: String = db::fetch_opt(tx, &code)
        .await?
        .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?
        .get(0);
    let bump = Query::insert()
        .into_table(Table::PurchaseOrderCounters)
        .columns(["branch_id", "last_seq"])
        .values_panic([branch_id.into(), 1i64.into()])
        .on_conflict(
            OnConflict::column("branch_id")
                .value(
                    "last_seq",
                    Expr::col(("purchase_order_counters", "last_seq")).add(1i64),
                )
                .to_owned(),
        )
        .returning_col("last_seq")
        .to_owned();
    let seq: i64 = db::fetch_one(tx, &bump).await?.get(0);
    Ok((seq, format!("{}-PO-{seq:06}", code.to_uppercase())))
}

pub(super) async fn read_back<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<PurchaseOrder> {
    get(tx, id)
        .await?
        .ok_or_else(|| Error::internal(format!("purchase order {id} vanished in its transaction")))
}

/// Writes a draft order of `acting`'s branch (or the one an admin names).
pub(super) async fn insert<C: GenericClient + Sync>(
    tx: &C,
    acting: &Acting,
    order: NewOrder,
) -> Result<PurchaseOrder> {
    let branch_id = acting.branch_scope(order.branch_id)?;
    let (lines, total) = priced(tx, order.supplier_id, &order.lines).await?;
    let (seq, po_number) = next_number(tx, branch_id).await?;
    let id = Uuid::now_v7();
    let q = Query::insert()
        .into_table(Table::PurchaseOrders)
        .columns([
            "id",
            "branch_id",
            "supplier_id",
            "seq",
            "po_number",
            "status",
            "expected_date",
            "notes",
            "total",
            "created_by",
        ])
        .values_panic([
            id.into(),
            branch_id.into(),
            order.supplier_id.into(),
            seq.into(),
            po_number.into(),
            DRAFT.into(),
            order.expected_date.into(),
            order.notes.into(),
            total.into(),
            acting.user_id.into(),
        ])
        .to_owned();
    db::execute(tx, &q).await?;
    insert_lines(tx, id, &lines).await?;
    read_back(tx, id).await
}

/// `POST /purchase-orders`: a `draft` order, numbered from its branch's
/// counter in the same transaction.
pub async fn create(
    pool: &Pool,
    acting: &Acting,
    body: PurchaseOrderRequest,
) -> Result<PurchaseOrder> {
    let branch = acting.branch_scope(body.branch_id)?;
    let order = body.validate(Some(branch))?;
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let made = insert(&tx, acting, order).await?;
    crate::db::commit(tx).await?;
    Ok(made)
}

/// What the order row says under its lock.
pub(super) struct Locked {
    pub branch_id: Uuid,
    pub status: String,
    pub submitted_by: Option<Uuid>,
    pub po_number: String,
}

/// Locks the order row (`FOR UPDATE`): 404 when it is not there or not of
/// a branch `acting` works on.
pub(super) async fn lock<C: GenericClient + Sync>(
    tx: &C,
    acting: &Acting,
    id: Uuid,
) -> Result<Locked> {
    let q = Query::select()
        .columns(["branch_id", "status", "submitted_by", "po_number"])
        .from(Table::PurchaseOrders)
        .and_where(Expr::col("id").eq(id))
        .lock(LockType::Update)
        .to_owned();
    let row = db::fetch_opt(tx, &q)
        .await?
        .filter(|r| acting.can_see_branch(r.get("branch_id")))
        .ok_or_else(|| Error::not_found("Purchase order not found"))?;
    Ok(Locked {
        branch_id: row.get("branch_id"),
        status: row.get("status"),
        submitted_by: row.get("submitted_by"),
        po_number: row.get("po_number"),
    })
}

/// `PUT /purchase-orders/{id}`: new header fields and lines for a draft
/// (409 naming the state otherwise). The branch and number stay.
pub async fn replace(
    pool: &Pool,
    acting: &Acting,
    id: Uuid,
    body: PurchaseOrderRequest,
) -> Result<PurchaseOrder> {
    let named = body
        .branch_id
        .map(|b| acting.branch_scope(Some(b)))
        .transpose()?;
    let order = body.validate(named)?;
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let locked = lock(&tx, acting, id).await?;
    if locked.status != DRAFT {
        return Err(Error::conflict(format!(
            "This purchase order is {}; only a draft can be changed.",
            locked.status
        )));
    }
    if order.branch_id.is_some_and(|b| b != locked.branch_id) {
        return Err(Error::validation(
            "branch_id",
            "An order stays on its branch: `branch_id` must be the order's.",
        ));
    }
    let (lines, total) = priced(&tx, order.supplier_id, &order.lines).await?;
    let wipe = Query::delete()
        .from_table(Table::PurchaseOrderLines)
        .and_where(Expr::col("purchase_order_id").eq(id))
        .to_owned();
    db::execute(&tx, &wipe).await?;
    insert_lines(&tx, id, &lines).await?;
    let q = Query::update()
        .table(Table::PurchaseOrders)
        .value("supplier_id", order.supplier_id)
        .value("expected_date", order.expected_date)
        .value("notes", order.notes)
        .value("total", total)
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    db::execute(&tx, &q).await?;
    let changed = read_back(&tx, id).await?;
    crate::db::commit(tx).await?;
    Ok(changed)
}
