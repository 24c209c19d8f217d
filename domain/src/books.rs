//! The statutory books an inspector reads (prescription book, classified
//! drugs register) and the fiscal payload of a sale.

use crate::tables::Table;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::paging;
use crate::sales::Sale;
use crate::{db, wire, Result};

use crate::replica::Reads;
use crate::window::Bounds;
use deadpool_postgres::Object;

/// A connection for the compliance books (the prescription book, the
/// classified-drugs book, the destruction register and the device register)
/// and their exports: a
/// book may be a few seconds old, so they read from the streaming standby
/// while it is within its lag bound, else from the primary. The API and the
/// console both connect here, so both read the same place.
pub async fn connect(reads: &Reads<'_>) -> Result<Object> {
    reads.standby().await
}

pub const PRESCRIPTION_BOOK_NOTE: &str =
    "Prescription records must be kept for 2 years and produced for inspection on request.";
pub const CLASSIFIED_BOOK_NOTE: &str = "This register is the statutory record of classified drugs of classes A, B and C (group II): every dispensing of a controlled medicine, kept for inspection.";
pub const DESTRUCTION_REGISTER_NOTE: &str = "This register is the statutory record of controlled medicines destroyed or lost: every write-off of a controlled medicine with its witness, kept for inspection (at least 2 years).";
pub const SUPPLIER_RETURNS_REGISTER_NOTE: &str = "This register is the statutory record of controlled medicines sent back to their suppliers: every supplier return of a controlled medicine with its batch, supplier and debit note, kept for inspection (at least 2 years).";
pub const FISCAL_NOTE: &str = "Preview only: this payload must still be submitted to the national fiscal system to obtain a fiscal document number, verification code and QR code.";

/// Which rows a book shows: one branch (or all, for an admin) within a window.
#[derive(Debug, Clone, Copy)]
pub struct Scope {
    pub branch_id: Option<Uuid>,
    pub bounds: Bounds,
}

/// Page of a book; `None` reads every row (CSV export).
pub type Paging = Option<(u64, u64)>;

#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct PrescriptionBookRow {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub rx_number: String,
    pub patient_name: String,
    pub patient_id_number: String,
    pub prescriber_name: String,
    pub prescriber_license: String,
    pub status: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    pub created_by_name: String,
    pub line_count: i64,
    #[schema(value_type = Option<String>)]
    pub sale_id: Option<Uuid>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub dispensed_at: Option<DateTime<Utc>>,
}

/// Live prescriptions, newest first, with their line counts.
pub async fn prescription_book<C: GenericClient + Sync>(
    c: &C,
    scope: Scope,
    paging: Paging,
) -> Result<(Vec<PrescriptionBookRow>, i64)> {
    let mut base = Query::select()
        .from_as(Table::Prescriptions, "p")
        .and_where(Expr::col(("p", "is_deleted")).eq(false))
        .to_owned();
    within(&mut base, ("p", "branch_id"), ("p", "created_at"), scope);
    let (rows, total) = paging::fetch(c, base, ("p", "id"), paging, |q| {
        q.columns([
            ("p", "id"),
            ("p", "branch_id"),
            ("p", "rx_number"),
            ("p", "patient_name"),
            ("p", "patient_id_number"),
            ("p", "prescriber_name"),
            ("p", "prescriber_license"),
            ("p", "status"),
            ("p", "created_at"),
            ("p", "sale_id"),
            ("p", "dispensed_at"),
        ])
        .expr_as(Expr::cust("coalesce(u.full_name, '')"), "created_by_name")
        .expr_as(
            Expr::cust(
                "(SELECT count(*) FROM prescription_items i WHERE i.prescription_id = p.id)",
            ),
            "line_count",
        )
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("p", "created_by")),
        )
        .order_by(("p", "created_at"), Order::Desc)
        .order_by(("p", "id"), Order::Desc);
    })
    .await?;
    let items = rows
        .iter()
        .map(|r| PrescriptionBookRow {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            rx_number: r.get("rx_number"),
            patient_name: r.get("patient_name"),
            patient_id_number: r.get("patient_id_number"),
            prescriber_name: r.get("prescriber_name"),
            prescriber_license: r.get("prescriber_license"),
            status: r.get("status"),
            created_at: r.get("created_at"),
            created_by_name: r.get("created_by_name"),
            line_count: r.get("line_count"),
            sale_id: r.get("sale_id"),
            dispensed_at: r.get("dispensed_at"),
        })
        .collect();
    Ok((items, total))
}

#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct ClassifiedBookRow {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub dispensed_at: DateTime<Utc>,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    pub control_schedule: String,
    pub quantity: i32,
    pub patient_national_id: String,
    pub doctor_license: String,
    pub dispensed_by_name: String,
    #[schema(value_type = String)]
    pub sale_id: Uuid,
    pub invoice_number: String,
    /// The credit note of a return: such a row has a negative quantity.
    pub credit_note_number: Option<String>,
}

/// Dispensings of controlled medicines, newest first.
pub async fn classified_book<C: GenericClient + Sync>(
    c: &C,
    scope: Scope,
    paging: Paging,
) -> Result<(Vec<ClassifiedBookRow>, i64)> {
    let mut base = Query::select()
        .from_as(Table::ControlledDispenses, "d")
        .join_as(
            JoinType::InnerJoin,
            Table::Medicines,
            "m",
            Expr::col(("m", "id")).equals(("d", "medicine_id")),
        )
        .and_where(Expr::col(("m", "is_controlled")).eq(true))
        .to_owned();
    within(&mut base, ("d", "branch_id"), ("d", "dispensed_at"), scope);
    let (rows, total) = paging::fetch(c, base, ("d", "id"), paging, |q| {
        q.columns([
            ("d", "id"),
            ("d", "branch_id"),
            ("d", "dispensed_at"),
            ("d", "medicine_id"),
            ("d", "quantity"),
            ("d", "patient_national_id"),
            ("d", "doctor_license"),
            ("d", "sale_id"),
        ])
        .expr_as(Expr::col(("m", "name")), "medicine_name")
        .expr_as(Expr::col(("m", "control_schedule")), "control_schedule")
        .expr_as(Expr::cust("coalesce(u.full_name, '')"), "dispensed_by_name")
        .expr_as(Expr::col(("s", "invoice_number")), "invoice_number")
        .expr_as(Expr::col(("r", "credit_note_number")), "credit_note_number")
        .join_as(
            JoinType::LeftJoin,
            Table::SaleReturns,
            "r",
            Expr::col(("r", "id")).equals(("d", "credit_note_id")),
        )
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("d", "dispensed_by")),
        )
        .join_as(
            JoinType::InnerJoin,
            Table::Sales,
            "s",
            Expr::col(("s", "id")).equals(("d", "sale_id")),
        )
        .order_by(("d", "dispensed_at"), Order::Desc)
        .order_by(("d", "id"), Order::Desc);
    })
    .await?;
    let items = rows
        .iter()
        .map(|r| ClassifiedBookRow {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            dispensed_at: r.get("dispensed_at"),
            medicine_id: r.get("medicine_id"),
            medicine_name: r.get("medicine_name"),
            control_schedule: r.get("control_schedule"),
            quantity: r.get("quantity"),
            patient_national_id: r.get("patient_national_id"),
            doctor_license: r.get("doctor_license"),
            dispensed_by_name: r.get("dispensed_by_name"),
            sale_id: r.get("sale_id"),
            invoice_number: r.get("invoice_number"),
            credit_note_number: r.get("credit_note_number"),
        })
        .collect();
    Ok((items, total))
}

fn within(q: &mut SelectStatement, branch: (&str, &str), at: (&str, &str), scope: Scope) {
    let (b, a) = (
        (branch.0.to_owned(), branch.1.to_owned()),
        (at.0.to_owned(), at.1.to_owned()),
    );
    if let Some(id) = scope.branch_id {
        q.and_where(Expr::col(b).eq(id));
    }
    if let Some(start) = scope.bounds.0 {
        q.and_where(Expr::col(a.clone()).gte(start));
    }
    if let Some(end) = scope.bounds.1 {
        q.and_where(Expr::col(a).lt(end));
    }
}

/// The fiscal payload of a sale, as it would be submitted.
#[derive(Debug, Serialize, ToSchema)]
pub struct FiscalPayload {
    pub seller: FiscalSeller,
    pub buyer: FiscalBuyer,
    pub totals: FiscalTotals,
    pub items: Vec<FiscalItem>,
    pub fiscalization: Fiscalization,
    /// What the tax authority made of the document (absent for documents
    /// older than the fiscal outbox).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fiscal: Option<crate::fiscal::read::FiscalStatus>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FiscalSeller {
    /// The organisation's TIN from the settings ("" when not given).
    pub tin: String,
    pub name: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub branch_name: String,
    pub vat_number: String,
    pub invoice_number: String,
    pub icv: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FiscalBuyer {
    /// Customers carry no TIN: always "" (a walk-in or a registered customer).
    pub tin: String,
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FiscalTotals {
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub subtotal: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub total: Decimal,
    pub vat_breakdown: Vec<VatBand>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VatBand {
    /// Whole percent.
    pub rate: i32,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub taxable_amount: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat_amount: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FiscalItem {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub sale_id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    pub quantity: i32,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub unit_price: Decimal,
    /// Whole percent.
    pub vat_rate: i32,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub vat_amount: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub cost_at_sale: Decimal,
    /// What the line came to (VAT included), for the VAT bands.
    #[serde(skip)]
    pub line_total: Decimal,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Fiscalization {
    /// Always `preview`: this service does not submit to the fiscal system.
    pub mode: String,
    pub note: String,
}

/// What a fiscal payload is built from: a sale, or a credit note.
pub struct FiscalDoc {
    pub branch_id: Uuid,
    pub customer_id: Option<Uuid>,
    /// The document's own number and counter value.
    pub number: String,
    pub icv: i64,
    pub subtotal: Decimal,
    pub vat: Decimal,
    pub total: Decimal,
    pub items: Vec<FiscalItem>,
}

/// Builds the payload from a sale (read-only).
pub async fn fiscal_payload<C: GenericClient + Sync>(c: &C, sale: Sale) -> Result<FiscalPayload> {
    let items = sale
        .items
        .iter()
        .map(|i| FiscalItem {
            id: i.id,
            sale_id: sale.id,
            medicine_id: i.medicine_id,
            medicine_name: i.medicine_name.clone(),
            batch_id: i.batch_id,
            quantity: i.quantity,
            unit_price: i.unit_price,
            vat_rate: i.vat_rate,
            vat_amount: i.vat_amount,
            line_total: i.line_total,
            cost_at_sale: i.cost_at_sale,
        })
        .collect();
    let status = crate::fiscal::read::status_of(c, crate::fiscal::Kind::T109, sale.id).await?;
    let doc = FiscalDoc {
        branch_id: sale.branch_id,
        customer_id: sale.customer_id,
        number: sale.invoice_number,
        icv: sale.icv,
        subtotal: sale.subtotal,
        vat: sale.vat,
        total: sale.total,
        items,
    };
    let mut payload = fiscal_payload_of(c, doc).await?;
    payload.fiscal = status;
    Ok(payload)
}

/// Builds the payload of a document (read-only): the seller from the
/// settings and the branch, the buyer, the totals with one VAT band per
/// whole-percent rate, and the lines.
pub async fn fiscal_payload_of<C: GenericClient + Sync>(
    c: &C,
    doc: FiscalDoc,
) -> Result<FiscalPayload> {
    let (customer_id, branch_id) = (doc.customer_id, doc.branch_id);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT coalesce(st.tin, '') AS tin, coalesce(st.name, st.legal_name, '') AS org_name,
                  b.name AS branch_name, b.vat_number,
                  coalesce((SELECT name FROM customers WHERE id = {customer_id}), '') AS buyer
           FROM branches b LEFT JOIN settings st ON st.org_id = b.org_id
           WHERE b.id = {branch_id}"#
    );
    let row = db::raw_opt(c, &q.sql, q.values)
        .await?
        .ok_or_else(|| crate::Error::internal("document of an unknown branch"))?;
    let buyer: String = row.get("buyer");
    let mut bands: BTreeMap<i32, (Decimal, Decimal)> = BTreeMap::new();
    for item in &doc.items {
        let band = bands.entry(item.vat_rate).or_default();
        band.0 += item.line_total - item.vat_amount;
        band.1 += item.vat_amount;
    }
    Ok(FiscalPayload {
        seller: FiscalSeller {
            tin: row.get("tin"),
            name: row.get("org_name"),
            branch_id: doc.branch_id,
            branch_name: row.get("branch_name"),
            vat_number: row.get("vat_number"),
            invoice_number: doc.number,
            icv: doc.icv,
        },
        buyer: FiscalBuyer {
            tin: String::new(),
            name: if buyer.is_empty() {
                "Walk-in customer".to_owned()
            } else {
                buyer
            },
        },
        totals: FiscalTotals {
            subtotal: doc.subtotal,
            vat: doc.vat,
            total: doc.total,
            vat_breakdown: bands
                .into_iter()
                .map(|(rate, (taxable_amount, vat_amount))| VatBand {
                    rate,
                    taxable_amount,
                    vat_amount,
                })
                .collect(),
        },
        items: doc.items,
        fiscalization: Fiscalization {
            mode: "preview".to_owned(),
            note: FISCAL_NOTE.to_owned(),
        },
        fiscal: None,
    })
}
