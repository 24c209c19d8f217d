//! Reading returns and credit notes back: one, a sale's, a filtered page,
//! the earlier return of a mutation id, the credit note chain check and the
//! fiscal payload of a credit note.

use crate::tables::Table;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use super::model::{credit_note_hash, percent, CreditNote, CreditNoteItem, NewReturn, Outcome};
use crate::books;
use crate::db;
use crate::error::{Error, Result};
use crate::idempotency;
use crate::paging::{self, Page, Slice};

const NOTE_COLUMNS: &str = "r.id, r.sale_id, r.branch_id, r.credit_note_number, r.cn_seq, \
    s.invoice_number AS original_invoice_number, s.icv AS original_icv, r.customer_id, \
    r.subtotal, r.vat, r.total, r.refund_method, r.restock, r.reason, r.status, r.approval_id, \
    r.cash_session_id, r.device_id, r.client_mutation_id, r.previous_hash, r.credit_note_hash, \
    r.created_by, coalesce(u.full_name, '') AS created_by_name, r.created_at, r.issued_by, \
    r.issued_at, r.decided_at, r.rev";

fn note_from_row(r: &Row) -> CreditNote {
    CreditNote {
        id: r.get("id"),
        sale_id: r.get("sale_id"),
        branch_id: r.get("branch_id"),
        credit_note_number: r.get("credit_note_number"),
        cn_seq: r.get("cn_seq"),
        original_invoice_number: r.get("original_invoice_number"),
        original_icv: r.get("original_icv"),
        customer_id: r.get("customer_id"),
        items: Vec::new(),
        subtotal: r.get("subtotal"),
        vat: r.get("vat"),
        total: r.get("total"),
        refund_method: r.get("refund_method"),
        restock: r.get("restock"),
        reason: r.get("reason"),
        status: r.get("status"),
        approval_id: r.get("approval_id"),
        cash_session_id: r.get("cash_session_id"),
        device_id: r.get("device_id"),
        client_mutation_id: r.get("client_mutation_id"),
        previous_hash: r.get("previous_hash"),
        credit_note_hash: r.get("credit_note_hash"),
        created_by: r.get("created_by"),
        created_by_name: r.get("created_by_name"),
        created_at: r.get("created_at"),
        issued_by: r.get("issued_by"),
        issued_at: r.get("issued_at"),
        decided_at: r.get("decided_at"),
        rev: r.get("rev"),
        fiscal: None,
    }
}

fn item_from_row(r: &Row) -> CreditNoteItem {
    let rate: Decimal = r.get("vat_rate");
    // Stored in base units; answered in what the sale line counted.
    let base: i32 = r.get("quantity");
    let units: i32 = r.get("pack_units");
    CreditNoteItem {
        id: r.get("id"),
        sale_item_id: r.get("sale_item_id"),
        medicine_id: r.get("medicine_id"),
        medicine_name: r.get("medicine_name"),
        batch_id: r.get("batch_id"),
        quantity: base / Ord::max(units, 1),
        pack_units: units,
        base_quantity: base,
        unit_price: r.get("unit_price"),
        vat_rate: percent(rate),
        vat_amount: r.get("vat_amount"),
        line_total: r.get("line_total"),
        restocked: r.get("restocked"),
        is_controlled: r.get("is_controlled"),
    }
}

/// Returns with their lines, shaped by `shape` (filters, order, paging).
async fn select<C: GenericClient + Sync>(
    c: &C,
    shape: impl FnOnce(&mut SelectStatement),
) -> Result<Vec<CreditNote>> {
    let mut q = Query::select()
        .expr(Expr::cust(NOTE_COLUMNS))
        .from_as(Table::SaleReturns, "r")
        .join_as(
            JoinType::InnerJoin,
            Table::Sales,
            "s",
            Expr::col(("s", "id")).equals(("r", "sale_id")),
        )
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("r", "created_by")),
        )
        .to_owned();
    shape(&mut q);
    let mut notes: Vec<CreditNote> = db::fetch_all(c, &q)
        .await?
        .iter()
        .map(note_from_row)
        .collect();
    if notes.is_empty() {
        return Ok(notes);
    }
    let ids: Vec<Uuid> = notes.iter().map(|n| n.id).collect();
    let items = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT ri.*, m.name AS medicine_name, m.is_controlled FROM sale_return_items ri
           JOIN medicines m ON m.id = ri.medicine_id
           WHERE ri.return_id = ANY({ids}) ORDER BY ri.return_id, ri.line_no, ri.id"#
    );
    let rows = db::raw_all(c, &items.sql, items.values).await?;
    let mut by_note: HashMap<Uuid, Vec<CreditNoteItem>> = HashMap::new();
    for r in &rows {
        by_note
            .entry(r.get("return_id"))
            .or_default()
            .push(item_from_row(r));
    }
    for n in &mut notes {
        n.items = by_note.remove(&n.id).unwrap_or_default();
    }
    Ok(notes)
}

/// One return with its lines.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<CreditNote>> {
    let found = select(c, |q| {
        q.and_where(Expr::col(("r", "id")).eq(id));
    })
    .await?;
    Ok(found.into_iter().next())
}

/// One return as `GET /returns/{id}` shows it: with its credit note's
/// fiscal status.
pub async fn get_shown<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<CreditNote>> {
    let mut note = get(c, id).await?;
    if let Some(n) = note.as_mut() {
        n.fiscal = crate::fiscal::read::status_of(c, crate::fiscal::Kind::T110, n.id).await?;
    }
    Ok(note)
}

/// Filters of a returns list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub sale_id: Option<Uuid>,
    pub status: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Newest first (by when they were filed); `page` `None` reads them all.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    page: Option<Page>,
) -> Result<(Vec<CreditNote>, i64)> {
    let filter = |q: &mut SelectStatement| {
        if let Some(b) = f.branch_id {
            q.and_where(Expr::col(("r", "branch_id")).eq(b));
        }
        if let Some(s) = f.sale_id {
            q.and_where(Expr::col(("r", "sale_id")).eq(s));
        }
        if let Some(s) = &f.status {
            q.and_where(Expr::col(("r", "status")).eq(s.clone()));
        }
        if let Some(from) = f.from {
            q.and_where(Expr::col(("r", "created_at")).gte(from));
        }
        if let Some(until) = f.until {
            q.and_where(Expr::col(("r", "created_at")).lt(until));
        }
    };
    let mut list = Query::select().from_as(Table::SaleReturns, "r").to_owned();
    filter(&mut list);
    let total = paging::count(c, &list, ("r", "id")).await?;
    let notes = select(c, |q| {
        filter(q);
        q.order_by(("r", "created_at"), Order::Desc)
            .order_by(("r", "id"), Order::Desc);
        page.apply(q);
    })
    .await?;
    Ok((notes, total))
}

/// The branch of a sale, when it exists.
pub async fn sale_branch<C: GenericClient + Sync>(c: &C, sale_id: Uuid) -> Result<Option<Uuid>> {
    let q = Query::select()
        .column("branch_id")
        .from(Table::Sales)
        .and_where(Expr::col("id").eq(sale_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)))
}

/// The branch of the return an approval decides, when the approval is a
/// return's (kind `refund`, filed with a cashier's return).
pub async fn refund_approval_branch<C: GenericClient + Sync>(
    c: &C,
    approval_id: Uuid,
) -> Result<Option<Uuid>> {
    let q = Query::select()
        .column("branch_id")
        .from(Table::SaleReturns)
        .and_where(Expr::col("approval_id").eq(approval_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)))
}

/// The earlier return of this request's mutation id, if any; 409 when the
/// id was used for a different return.
pub async fn replay<C: GenericClient + Sync>(c: &C, r: &NewReturn) -> Result<Option<Outcome>> {
    let found = idempotency::lookup(c, r.key(), &r.digest(), &["id"]).await?;
    let Some(row) = found.or_refuse("return")? else {
        return Ok(None);
    };
    let note = get(c, row.get("id"))
        .await?
        .ok_or_else(|| Error::internal("replayed return vanished"))?;
    Ok(Some(Outcome {
        note,
        replayed: true,
    }))
}

/// The check of a branch's credit note chain.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CreditNoteChain {
    /// `ok` or `broken`.
    pub status: String,
    /// Credit notes checked.
    pub checked: i64,
    /// The first credit note whose link does not hold, when broken.
    pub first_broken: Option<BrokenCreditNote>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BrokenCreditNote {
    pub cn_seq: i64,
    pub credit_note_number: String,
    #[schema(value_type = String)]
    pub credit_note_id: Uuid,
    pub reason: String,
}

/// Walks a branch's credit notes in `cn_seq` order, recomputing every hash:
/// the first missing number, wrong previous hash or altered credit note is
/// reported.
pub async fn verify_chain<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
) -> Result<CreditNoteChain> {
    const CHUNK: u64 = 500;
    let mut expected_prev = crate::sales::GENESIS_HASH.to_owned();
    let mut expected_seq = 1i64;
    let mut checked = 0i64;
    let broken = |n: &CreditNote, reason: &str, checked| CreditNoteChain {
        status: "broken".to_owned(),
        checked,
        first_broken: Some(BrokenCreditNote {
            cn_seq: n.cn_seq.unwrap_or_default(),
            credit_note_number: n.credit_note_number.clone().unwrap_or_default(),
            credit_note_id: n.id,
            reason: reason.to_owned(),
        }),
    };
    loop {
        let after = expected_seq - 1;
        let page = select(c, |q| {
            q.and_where(Expr::col(("r", "branch_id")).eq(branch_id))
                .and_where(Expr::col(("r", "status")).eq("issued"))
                .and_where(Expr::col(("r", "cn_seq")).gt(after))
                .order_by(("r", "cn_seq"), Order::Asc)
                .limit(CHUNK);
        })
        .await?;
        let done = (page.len() as u64) < CHUNK;
        for n in page {
            checked += 1;
            if n.cn_seq != Some(expected_seq) {
                return Ok(broken(
                    &n,
                    "credit note numbers skip or repeat here",
                    checked,
                ));
            }
            if n.previous_hash.as_deref() != Some(expected_prev.as_str()) {
                return Ok(broken(
                    &n,
                    "previous_hash does not match the previous credit note",
                    checked,
                ));
            }
            let at = n.issued_at.unwrap_or(n.created_at);
            let hash = credit_note_hash(&n, at);
            if n.credit_note_hash.as_deref() != Some(hash.as_str()) {
                return Ok(broken(
                    &n,
                    "the credit note content does not match its hash",
                    checked,
                ));
            }
            expected_prev = hash;
            expected_seq += 1;
        }
        if done {
            break;
        }
    }
    Ok(CreditNoteChain {
        status: "ok".to_owned(),
        checked,
        first_broken: None,
    })
}

/// The fiscal payload of a credit note: the sale's shape, with the credit
/// note's number and `cn_seq` as the seller's document number and counter,
/// and the original invoice's number and icv.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CreditNoteFiscalPayload {
    /// Always `credit_note`.
    pub document_type: String,
    pub original_invoice_number: String,
    pub original_icv: i64,
    #[schema(value_type = String)]
    pub original_sale_id: Uuid,
    #[serde(flatten)]
    pub payload: books::FiscalPayload,
}

/// Builds the fiscal payload of an issued credit note (read-only).
pub async fn fiscal_payload<C: GenericClient + Sync>(
    c: &C,
    note: CreditNote,
) -> Result<CreditNoteFiscalPayload> {
    let note_id = note.id;
    let cost = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT ri.id, i.cost_at_sale FROM sale_return_items ri
           JOIN sale_items i ON i.id = ri.sale_item_id
           WHERE ri.return_id = {note_id}"#
    );
    let costs: HashMap<Uuid, Decimal> = db::raw_all(c, &cost.sql, cost.values)
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let items = note
        .items
        .iter()
        .map(|i| books::FiscalItem {
            id: i.id,
            sale_id: note.sale_id,
            medicine_id: i.medicine_id,
            medicine_name: i.medicine_name.clone(),
            batch_id: i.batch_id,
            quantity: i.quantity,
            unit_price: i.unit_price,
            vat_rate: i.vat_rate,
            vat_amount: i.vat_amount,
            cost_at_sale: costs.get(&i.id).copied().unwrap_or_default(),
            line_total: i.line_total,
        })
        .collect();
    let doc = books::FiscalDoc {
        branch_id: note.branch_id,
        customer_id: note.customer_id,
        number: note.credit_note_number.clone().unwrap_or_default(),
        icv: note.cn_seq.unwrap_or_default(),
        subtotal: note.subtotal,
        vat: note.vat,
        total: note.total,
        items,
    };
    Ok(CreditNoteFiscalPayload {
        document_type: "credit_note".to_owned(),
        original_invoice_number: note.original_invoice_number,
        original_icv: note.original_icv,
        original_sale_id: note.sale_id,
        payload: {
            let mut p = books::fiscal_payload_of(c, doc).await?;
            p.fiscal =
                crate::fiscal::read::status_of(c, crate::fiscal::Kind::T110, note_id).await?;
            p
        },
    })
}
