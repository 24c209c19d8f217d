//! The print payload of a sale's receipt and of a credit note: what the
//! till's browser lays out on paper, with the tax authority's identifiers
//! (the FDN, the verification code and the QR code) once the document is
//! accepted, or a "fiscal document pending" line until then. A till that
//! printed "pending" reprints when the change feed brings the FDN.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::fiscal::read::FiscalStatus;
use crate::fiscal::Kind as FiscalKind;
use crate::returns::CreditNote;
use crate::sales::Sale;
use crate::{branches, wire, Result};

/// The printed line while the authority has not accepted the document.
pub const PENDING_LINE: &str = "Fiscal document pending";
/// The printed line of identifiers issued by the simulator.
pub const SIMULATED_LINE: &str = "SIMULATED - not issued by URA";

/// One printed line of goods.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReceiptLine {
    pub description: String,
    /// Packs for a line sold by the pack, else base units.
    pub quantity: i32,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub unit_price: Decimal,
    /// VAT rate in whole percent.
    pub vat_rate: i32,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub line_total: Decimal,
}

/// What the tax authority made of the document, as the receipt prints it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReceiptFiscal {
    /// `waiting`, `pending`, `submitting`, `accepted`, `retrying`,
    /// `rejected`, or `none` for a document older than the fiscal outbox.
    pub status: String,
    /// True until the authority accepted the document: the receipt then
    /// prints "Fiscal document pending" instead of the identifiers.
    pub pending: bool,
    /// The fiscal document number (invoices).
    pub fdn: Option<String>,
    pub verification_code: Option<String>,
    /// The payload to print as a QR code.
    pub qr_code: Option<String>,
    /// The authority's reference number (credit notes).
    pub reference_no: Option<String>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub accepted_at: Option<DateTime<Utc>>,
    /// Identifiers issued by the simulator, not the authority (printed as
    /// `SIMULATED`).
    pub simulated: bool,
    /// The fiscal block's printable lines, in order.
    pub lines: Vec<String>,
}

impl ReceiptFiscal {
    fn of(kind: FiscalKind, status: Option<FiscalStatus>) -> ReceiptFiscal {
        let Some(s) = status else {
            return ReceiptFiscal {
                status: "none".to_owned(),
                pending: false,
                fdn: None,
                verification_code: None,
                qr_code: None,
                reference_no: None,
                accepted_at: None,
                simulated: false,
                lines: vec!["Not fiscalised (made before EFRIS submission)".to_owned()],
            };
        };
        let accepted = s.status == "accepted";
        let mut lines = Vec::new();
        if !accepted {
            lines.push(PENDING_LINE.to_owned());
        } else {
            if let Some(fdn) = &s.fdn {
                lines.push(format!("FDN: {fdn}"));
            }
            if let Some(code) = &s.verification_code {
                lines.push(format!("Verification code: {code}"));
            }
            if kind == FiscalKind::T110 {
                if let Some(reference) = &s.reference_no {
                    lines.push(format!("EFRIS reference: {reference}"));
                }
            }
            if s.simulated {
                lines.push(SIMULATED_LINE.to_owned());
            }
        }
        ReceiptFiscal {
            pending: !accepted,
            status: s.status,
            fdn: s.fdn,
            verification_code: s.verification_code,
            qr_code: s.qr_code,
            reference_no: s.reference_no,
            accepted_at: s.accepted_at,
            simulated: s.simulated,
            lines,
        }
    }
}

/// A receipt or credit note ready to print.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Receipt {
    /// `receipt` (a sale) or `credit_note`.
    pub document_type: String,
    /// The sale's or the credit note's id (a print job's `reference_id`).
    #[schema(value_type = String)]
    pub reference_id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub branch_name: String,
    pub branch_address: String,
    /// The branch's VAT number (the seller's TIN on the receipt).
    pub vat_number: String,
    /// The invoice number, or the credit note number.
    pub number: String,
    /// A credit note's original invoice number.
    pub original_invoice_number: Option<String>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub issued_at: DateTime<Utc>,
    pub served_by: String,
    /// How it was paid, or how a credit note is refunded.
    pub payment_method: String,
    /// The branch's default receipt template's texts (empty without one).
    pub header_text: String,
    pub footer_text: String,
    pub lines: Vec<ReceiptLine>,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub subtotal: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub discount: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub vat: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total: Decimal,
    pub fiscal: ReceiptFiscal,
}

/// The branch's name, address, VAT number and default template texts.
struct Head {
    name: String,
    address: String,
    vat_number: String,
    header: String,
    footer: String,
}

async fn head<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<Head> {
    let branch = branches::get(c, branch_id).await?;
    let template = super::templates(c, branch_id).await?.into_iter().next();
    Ok(Head {
        name: branch.as_ref().map(|b| b.name.clone()).unwrap_or_default(),
        address: branch
            .as_ref()
            .map(|b| b.address.clone())
            .unwrap_or_default(),
        vat_number: branch.map(|b| b.vat_number).unwrap_or_default(),
        header: template
            .as_ref()
            .map(|t| t.header_text.clone())
            .unwrap_or_default(),
        footer: template.map(|t| t.footer_text).unwrap_or_default(),
    })
}

/// The print payload of a sale (as `sales::get_shown` read it, with its
/// fiscal status).
pub async fn of_sale<C: GenericClient + Sync>(c: &C, sale: Sale) -> Result<Receipt> {
    let head = head(c, sale.branch_id).await?;
    let lines = sale
        .items
        .iter()
        .map(|i| ReceiptLine {
            description: i.medicine_name.clone(),
            quantity: i.quantity,
            unit_price: i.unit_price,
            vat_rate: i.vat_rate,
            line_total: i.line_total,
        })
        .collect();
    Ok(Receipt {
        document_type: "receipt".to_owned(),
        reference_id: sale.id,
        branch_id: sale.branch_id,
        branch_name: head.name,
        branch_address: head.address,
        vat_number: head.vat_number,
        number: sale.invoice_number,
        original_invoice_number: None,
        issued_at: sale.created_at,
        served_by: sale.created_by_name,
        payment_method: sale.payment_method,
        header_text: head.header,
        footer_text: head.footer,
        lines,
        subtotal: sale.subtotal,
        discount: sale.discount,
        vat: sale.vat,
        total: sale.total,
        fiscal: ReceiptFiscal::of(FiscalKind::T109, sale.fiscal),
    })
}

/// The print payload of an issued credit note (as `returns::get_shown`
/// read it).
pub async fn of_credit_note<C: GenericClient + Sync>(c: &C, note: CreditNote) -> Result<Receipt> {
    let head = head(c, note.branch_id).await?;
    let lines = note
        .items
        .iter()
        .map(|i| ReceiptLine {
            description: i.medicine_name.clone(),
            quantity: i.quantity,
            unit_price: i.unit_price,
            vat_rate: i.vat_rate,
            line_total: i.line_total,
        })
        .collect();
    Ok(Receipt {
        document_type: "credit_note".to_owned(),
        reference_id: note.id,
        branch_id: note.branch_id,
        branch_name: head.name,
        branch_address: head.address,
        vat_number: head.vat_number,
        number: note.credit_note_number.unwrap_or_default(),
        original_invoice_number: Some(note.original_invoice_number),
        issued_at: note.issued_at.unwrap_or(note.created_at),
        served_by: note.created_by_name,
        payment_method: note.refund_method,
        header_text: head.header,
        footer_text: head.footer,
        lines,
        subtotal: note.subtotal,
        discount: Decimal::ZERO,
        vat: note.vat,
        total: note.total,
        fiscal: ReceiptFiscal::of(FiscalKind::T110, note.fiscal),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(s: &str, simulated: bool) -> FiscalStatus {
        let accepted = s == "accepted";
        FiscalStatus {
            status: s.to_owned(),
            fdn: accepted.then(|| "3240000001".to_owned()),
            verification_code: accepted.then(|| "VC123".to_owned()),
            qr_code: accepted.then(|| "SIMULATED|qr".to_owned()),
            reference_no: None,
            accepted_at: None,
            last_error: None,
            simulated,
        }
    }

    #[test]
    fn an_accepted_invoice_prints_its_fdn_and_verification_code() {
        let f = ReceiptFiscal::of(FiscalKind::T109, Some(status("accepted", true)));
        assert!(!f.pending);
        assert_eq!(
            f.lines,
            [
                "FDN: 3240000001",
                "Verification code: VC123",
                SIMULATED_LINE
            ]
        );
        assert_eq!(f.qr_code.as_deref(), Some("SIMULATED|qr"));
    }

    #[test]
    fn an_unaccepted_document_prints_pending() {
        for s in ["waiting", "pending", "submitting", "retrying", "rejected"] {
            let f = ReceiptFiscal::of(FiscalKind::T109, Some(status(s, false)));
            assert!(f.pending, "{s}");
            assert_eq!(f.lines, [PENDING_LINE], "{s}");
            assert!(f.fdn.is_none() && f.qr_code.is_none());
        }
    }
}
