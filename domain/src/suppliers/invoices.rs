//! Supplier invoices and the payments against them. `paid_amount` moves
//! only by a conditional update (`paid_amount + amount <= total_amount`) in
//! the same transaction as the payment row, so an invoice is never
//! overpaid whatever the number of server processes; CHECKs back it and keep
//! `status` in step with `paid_amount`.

use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::buying::received::{Charge, ReceiptChargeRequest};
use crate::buying::returns::settle;
use crate::db::{self, Pool};
use crate::error::{Code, Error, Result};
use crate::suppliers::matching::{self, InvoiceLineRequest, MatchedLine};
use crate::{branches, input, wire, Acting, Registry};

/// Invoice statuses, in the order an invoice moves through them.
pub const STATUSES: [&str; 3] = ["unpaid", "partial", "paid"];
/// Accepted payment methods. `debit_note` settles with a supplier
/// return's debit note, named by `reference` (`buying::returns::settle`).
pub const METHODS: [&str; 6] = [
    "cash",
    "bank_transfer",
    "mobile_money",
    "cheque",
    "card",
    settle::METHOD,
];

/// Longest note on a supplier invoice.
pub const MAX_NOTES: usize = 1000;

/// Longest reference of a supplier payment (a bank or mobile-money
/// transaction id, a cheque number).
pub const MAX_PAYMENT_REFERENCE: usize = 200;

/// Most rows the invoice list returns (spec Limits).
pub const LIST_LIMIT: i64 = 50;

/// The supplier invoice read shape: money as decimal strings, `due_date` as
/// `YYYY-MM-DD` or null.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SupplierInvoice {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub supplier_id: Uuid,
    pub supplier_name: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub invoice_no: String,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1500000.00")]
    pub total_amount: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "500000.00")]
    pub paid_amount: Decimal,
    /// `total_amount − paid_amount`.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1000000.00")]
    pub balance: Decimal,
    /// `unpaid`, `partial` or `paid`.
    pub status: String,
    #[schema(value_type = Option<String>, example = "2026-12-31")]
    pub due_date: Option<NaiveDate>,
    pub notes: String,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
    /// `unmatched` (no lines), `matched`, `on_hold` (a line's price is off
    /// beyond the tolerance, or it billed goods not yet received: no
    /// payment until released) or `released`.
    pub match_status: String,
    /// The receipt lines billed, each with its difference from the receipt.
    pub lines: Vec<MatchedLine>,
    /// Charges billed beside the lines.
    pub charges: Vec<Charge>,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub charges_total: Decimal,
    #[schema(value_type = Option<String>)]
    pub released_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub released_at: Option<DateTime<Utc>>,
    pub release_reason: Option<String>,
}

impl SupplierInvoice {
    /// From a `supplier_invoices` row joined with `supplier_name`.
    pub fn from_row(r: &Row) -> Self {
        let total_amount: Decimal = r.get("total_amount");
        let paid_amount: Decimal = r.get("paid_amount");
        SupplierInvoice {
            id: r.get("id"),
            supplier_id: r.get("supplier_id"),
            supplier_name: r.get("supplier_name"),
            branch_id: r.get("branch_id"),
            invoice_no: r.get("invoice_no"),
            total_amount,
            paid_amount,
            balance: total_amount - paid_amount,
            status: r.get("status"),
            due_date: r.get("due_date"),
            notes: r.get("notes"),
            created_by: r.get("created_by"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
            match_status: r.get("match_status"),
            lines: Vec::new(),
            charges: Vec::new(),
            charges_total: r.get("charges_total"),
            released_by: r.get("released_by"),
            released_at: r.get("released_at"),
            release_reason: r.get("release_reason"),
        }
    }
}

/// Fills the billed lines and charges of `invoices` (two statements).
async fn with_lines<C: GenericClient + Sync>(
    c: &C,
    mut invoices: Vec<SupplierInvoice>,
) -> Result<Vec<SupplierInvoice>> {
    let ids: Vec<Uuid> = invoices
        .iter()
        .filter(|i| i.match_status != "unmatched")
        .map(|i| i.id)
        .collect();
    if ids.is_empty() {
        return Ok(invoices);
    }
    let mut billed = matching::lines_of(c, &ids).await?;
    for i in &mut invoices {
        if let Some((lines, charges)) = billed.remove(&i.id) {
            i.lines = lines;
            i.charges = charges;
        }
    }
    Ok(invoices)
}

/// One invoice, whatever its branch (callers check visibility).
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<SupplierInvoice>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT i.*, s.name AS supplier_name
           FROM supplier_invoices i JOIN suppliers s ON s.id = i.supplier_id
           WHERE i.id = {id}"#
    );
    let found: Vec<SupplierInvoice> = db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| SupplierInvoice::from_row(&r))
        .into_iter()
        .collect();
    Ok(with_lines(c, found).await?.pop())
}

/// A checked invoice to record.
pub struct NewInvoice {
    pub supplier_id: Uuid,
    pub branch_id: Uuid,
    pub invoice_no: String,
    pub total_amount: Decimal,
    pub due_date: Option<NaiveDate>,
    pub notes: String,
    pub created_by: Uuid,
}

/// Records an `unpaid` invoice. `None` when the supplier is unknown or
/// deleted (checked in the insert itself).
pub async fn insert<C: GenericClient + Sync>(
    c: &C,
    n: NewInvoice,
) -> Result<Option<SupplierInvoice>> {
    let id = Uuid::now_v7();
    let NewInvoice {
        supplier_id,
        branch_id,
        invoice_no,
        total_amount,
        due_date,
        notes,
        created_by,
    } = n;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH s AS (
             SELECT id, name FROM suppliers WHERE id = {supplier_id}::uuid AND NOT is_deleted
           ), row AS (
             INSERT INTO supplier_invoices (id, supplier_id, branch_id, invoice_no, total_amount,
                                            paid_amount, status, due_date, notes, created_by)
             SELECT {id}::uuid, s.id, {branch_id}::uuid, {invoice_no}::text,
                    {total_amount}::numeric, 0, 'unpaid', {due_date}::date, {notes}::text,
                    {created_by}::uuid
             FROM s
             RETURNING *)
           SELECT row.*, s.name AS supplier_name FROM row JOIN s ON s.id = row.supplier_id"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| SupplierInvoice::from_row(&r)))
}

/// List filters; `None` means any.
#[derive(Debug, Default)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub supplier_id: Option<Uuid>,
    pub status: Option<String>,
}

/// Newest first, at most [`LIST_LIMIT`] rows.
pub async fn list<C: GenericClient + Sync>(c: &C, f: ListFilter) -> Result<Vec<SupplierInvoice>> {
    let ListFilter {
        branch_id,
        supplier_id,
        status,
    } = f;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT i.*, s.name AS supplier_name
           FROM supplier_invoices i JOIN suppliers s ON s.id = i.supplier_id
           WHERE ({branch_id}::uuid IS NULL OR i.branch_id = {branch_id}::uuid)
             AND ({supplier_id}::uuid IS NULL OR i.supplier_id = {supplier_id}::uuid)
             AND ({status}::text IS NULL OR i.status = {status}::text)
           ORDER BY i.created_at DESC, i.id DESC
           LIMIT {LIST_LIMIT}"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    with_lines(c, rows.iter().map(SupplierInvoice::from_row).collect()).await
}

/// A payment row as answered.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SupplierPayment {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub invoice_id: Uuid,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "250000.00")]
    pub amount: Decimal,
    pub method: String,
    pub reference: String,
    #[schema(value_type = String)]
    pub paid_by: Uuid,
    pub paid_by_name: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

impl SupplierPayment {
    pub fn from_row(r: &Row) -> Self {
        SupplierPayment {
            id: r.get("id"),
            invoice_id: r.get("invoice_id"),
            amount: r.get("amount"),
            method: r.get("method"),
            reference: r.get("reference"),
            paid_by: r.get("paid_by"),
            paid_by_name: r.get("paid_by_name"),
            created_at: r.get("created_at"),
        }
    }
}

/// The 201 answer to a payment: the payment and the invoice after it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SupplierPaymentReceipt {
    pub payment: SupplierPayment,
    pub invoice: SupplierInvoice,
}

/// A payment against a supplier invoice, run through the invoice's branch
/// actor. `amount` must be above zero and at most the outstanding balance;
/// `method` one of [`METHODS`] (checked by the caller).
pub struct PaySupplierInvoice {
    pub invoice_id: Uuid,
    pub amount: Decimal,
    pub method: String,
    pub reference: String,
    pub user_id: Uuid,
}

impl actors::runtime::Command for PaySupplierInvoice {
    type Error = crate::Error;
    type Output = SupplierPaymentReceipt;
    const NAME: &'static str = "pay_supplier_invoice";

    async fn run(self, pool: crate::db::Pool) -> Result<SupplierPaymentReceipt> {
        let PaySupplierInvoice {
            invoice_id,
            amount,
            method,
            reference,
            user_id,
        } = self;
        if amount <= Decimal::ZERO {
            return Err(Error::validation(
                "amount",
                "`amount` must be greater than zero.",
            ));
        }
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        // Concurrent payers queue on the row lock; each re-checks the
        // condition against the committed paid_amount before applying.
        let update = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"UPDATE supplier_invoices
               SET paid_amount = paid_amount + {amount}::numeric,
                   status = CASE WHEN paid_amount + {amount}::numeric >= total_amount
                                 THEN 'paid' ELSE 'partial' END,
                   updated_at = now()
               WHERE id = {invoice_id}::uuid
                 AND paid_amount + {amount}::numeric <= total_amount
                 AND match_status <> 'on_hold'
               RETURNING id"#
        );
        if db::raw_opt(&tx, &update.sql, update.values)
            .await?
            .is_none()
        {
            return Err(refusal(&tx, invoice_id, amount).await);
        }
        // A debit note pays with what it has not settled yet; the payment
        // carries the note's number as issued.
        let note = match method == settle::METHOD {
            true => Some(settle::take(&tx, invoice_id, &reference, amount).await?),
            false => None,
        };
        let reference = note.as_ref().map_or(reference, |n| n.number.clone());
        let payment_id = Uuid::now_v7();
        let insert = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"WITH row AS (
                 INSERT INTO supplier_payments (id, invoice_id, amount, method, reference, paid_by)
                 VALUES ({payment_id}, {invoice_id}, {amount}, {method}, {reference}, {user_id})
                 RETURNING *)
               SELECT row.*, coalesce(u.full_name, '') AS paid_by_name
               FROM row LEFT JOIN users u ON u.id = row.paid_by"#
        );
        let payment = db::raw_opt(&tx, &insert.sql, insert.values)
            .await?
            .map(|r| SupplierPayment::from_row(&r))
            .ok_or_else(|| Error::internal("supplier payment insert returned no row"))?;
        if let Some(note) = &note {
            settle::record(&tx, note, invoice_id, payment_id, amount).await?;
        }
        let invoice = get(&tx, invoice_id)
            .await?
            .ok_or_else(|| Error::internal("paid supplier invoice vanished"))?;
        crate::db::commit(tx).await?;
        Ok(SupplierPaymentReceipt { payment, invoice })
    }
}

/// Why a payment was refused: 404 unknown invoice, 409 already paid, 400
/// above the outstanding balance (naming both figures).
async fn refusal<C: GenericClient + Sync>(tx: &C, invoice_id: Uuid, amount: Decimal) -> Error {
    let invoice = match get(tx, invoice_id).await {
        Ok(Some(i)) => i,
        Ok(None) => return Error::not_found("Supplier invoice not found"),
        Err(e) => return e,
    };
    if invoice.match_status == "on_hold" {
        return Error::coded(
            Code::InvoiceOnHold,
            None,
            format!(
                "Invoice {} is on hold: its lines do not match what was received. A branch \
                 manager or admin releases it (`POST /supplier-finance/invoices/{}/release`).",
                label(&invoice),
                invoice.id
            ),
        );
    }
    if invoice.status == "paid" {
        return Error::conflict(format!(
            "Invoice {} is already paid in full ({}).",
            label(&invoice),
            wire::two_places(invoice.total_amount)
        ));
    }
    Error::validation(
        "amount",
        format!(
            "A payment of {} is more than the outstanding balance of {} on invoice {}.",
            wire::two_places(amount),
            wire::two_places(invoice.balance),
            label(&invoice)
        ),
    )
}

fn label(invoice: &SupplierInvoice) -> String {
    if invoice.invoice_no.is_empty() {
        invoice.id.to_string()
    } else {
        invoice.invoice_no.clone()
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct InvoiceRequest {
    #[schema(value_type = String, format = Uuid)]
    pub supplier_id: Option<Uuid>,
    /// More than 0; a number or a decimal string.
    #[schema(value_type = f64, minimum = 0)]
    pub total_amount: Option<Decimal>,
    /// Default the caller's branch; only admins may name another.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    pub invoice_no: Option<String>,
    /// `YYYY-MM-DD`.
    #[schema(example = "2026-12-31")]
    pub due_date: Option<String>,
    pub notes: Option<String>,
    /// The goods received lines billed (three-way match); without them the
    /// invoice is `unmatched`. With them, `total_amount` must equal Σ
    /// quantity × unit cost + Σ charges.
    pub lines: Option<Vec<InvoiceLineRequest>>,
    /// Charges billed beside the lines (freight, insurance, clearing, other).
    pub charges: Option<Vec<ReceiptChargeRequest>>,
}

/// Records a supplier invoice as `unpaid` for `acting`, on its own branch
/// or (an admin) the live branch it names.
pub async fn record(pool: &Pool, acting: &Acting, body: InvoiceRequest) -> Result<SupplierInvoice> {
    let supplier_id = body
        .supplier_id
        .ok_or_else(|| Error::validation("supplier_id", "The field `supplier_id` is required."))?;
    let total_amount = body.total_amount.ok_or_else(|| {
        Error::validation("total_amount", "The field `total_amount` is required.")
    })?;
    let total_amount = input::positive_amount("total_amount", total_amount)?;
    let branch_id = acting.branch_scope(body.branch_id)?;
    let due_date = match body.due_date.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(d) => Some(NaiveDate::parse_from_str(d, "%Y-%m-%d").map_err(|_| {
            Error::validation("due_date", "`due_date` must be a date as YYYY-MM-DD.")
        })?),
    };
    let invoice_no = input::text(
        "invoice_no",
        body.invoice_no.as_deref().unwrap_or(""),
        input::max::LABEL,
    )?;
    let notes = input::multiline("notes", body.notes.as_deref().unwrap_or(""), MAX_NOTES)?;
    let billing = match body.lines {
        Some(lines) => Some(matching::billing(
            lines,
            body.charges.unwrap_or_default(),
            total_amount,
        )?),
        None if body.charges.as_ref().is_some_and(|c| !c.is_empty()) => {
            return Err(Error::validation(
                "charges",
                "`charges` are billed beside `lines`; an invoice without lines has none.",
            ))
        }
        None => None,
    };
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    if body.branch_id.is_some() {
        branches::named(&tx, branch_id).await?;
    }
    let new = NewInvoice {
        supplier_id,
        branch_id,
        invoice_no,
        total_amount,
        due_date,
        notes,
        created_by: acting.user_id,
    };
    let invoice = insert(&tx, new)
        .await?
        .ok_or_else(|| Error::validation("supplier_id", "`supplier_id` names no supplier."))?;
    let Some(billing) = billing else {
        crate::db::commit(tx).await?;
        return Ok(invoice);
    };
    let parties = matching::Invoice {
        id: invoice.id,
        supplier_id,
        branch_id,
    };
    matching::bill(&tx, &parties, &billing).await?;
    let invoice = get(&tx, invoice.id)
        .await?
        .ok_or_else(|| Error::internal("the invoice just billed vanished"))?;
    crate::db::commit(tx).await?;
    Ok(invoice)
}

/// The status filter of a list: `unpaid`, `partial` or `paid` in any case;
/// empty means all.
pub fn status_filter(raw: Option<&str>) -> Result<Option<String>> {
    let status = match raw.map(str::trim) {
        None | Some("") => None,
        Some(s) => {
            let s = s.to_lowercase();
            if !STATUSES.contains(&s.as_str()) {
                return Err(Error::validation(
                    "status",
                    "`status` must be `unpaid`, `partial` or `paid`.",
                ));
            }
            Some(s)
        }
    };
    Ok(status)
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SupplierPaymentRequest {
    /// More than 0 and at most the outstanding balance; a number or a decimal string.
    #[schema(value_type = f64)]
    pub amount: Option<Decimal>,
    /// `cash` (default), `bank_transfer`, `mobile_money`, `cheque`, `card`
    /// or `debit_note` (settles with a supplier return's debit note).
    pub method: Option<String>,
    /// A `debit_note` payment: the note's number (`<BRANCH CODE>-DN-<8
    /// digits>`), of the invoice's supplier and branch; the amount is at
    /// most what the note has not settled yet.
    pub reference: Option<String>,
}

/// Pays (part of) invoice `invoice_id` for `acting`, on the invoice's
/// branch actor: `unpaid` → `partial` → `paid`. Other branches' invoices
/// read as missing to a non-admin.
pub async fn pay(
    pool: &Pool,
    registry: &Registry,
    acting: &Acting,
    invoice_id: Uuid,
    body: SupplierPaymentRequest,
) -> Result<SupplierPaymentReceipt> {
    let amount = body
        .amount
        .ok_or_else(|| Error::validation("amount", "The field `amount` is required."))?;
    let amount = input::positive_amount("amount", amount)?;
    let method = match body.method.as_deref().map(str::trim) {
        None | Some("") => "cash".to_owned(),
        Some(m) => {
            let m = m.to_lowercase();
            if !METHODS.contains(&m.as_str()) {
                return Err(Error::validation(
                    "method",
                    "`method` must be `cash`, `bank_transfer`, `mobile_money`, `cheque`, `card` \
                     or `debit_note`.",
                ));
            }
            m
        }
    };
    let reference = input::text(
        "reference",
        body.reference.as_deref().unwrap_or(""),
        MAX_PAYMENT_REFERENCE,
    )?;
    if method == settle::METHOD && reference.is_empty() {
        return Err(Error::validation(
            "reference",
            "A `debit_note` payment names its debit note: `reference` is its number.",
        ));
    }
    let not_found = || Error::not_found("Supplier invoice not found");
    // Other branches' invoices read as missing to a non-admin.
    let invoice = {
        let client = pool.get().await?;
        get(&client, invoice_id)
            .await?
            .filter(|i| acting.can_see_branch(i.branch_id))
            .ok_or_else(not_found)?
    };
    let payment = PaySupplierInvoice {
        invoice_id,
        amount,
        method,
        reference,
        user_id: acting.user_id,
    };
    let receipt = registry.branch(invoice.branch_id, payment).await?;
    Ok(receipt)
}
