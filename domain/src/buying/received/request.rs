//! `POST /goods-received` as a client sends it, and the checks that need
//! no database: required text, whole quantities, 2-place amounts, charge
//! kinds, rejects with reasons, and the line and charge limits.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::input;
use crate::stock::receiving::request::MAX_BATCH_NUMBER;

/// Most lines one delivery may carry.
pub const MAX_LINES: usize = 200;
/// Most charges one delivery may carry.
pub const MAX_CHARGES: usize = 20;
/// Longest delivery reference (the supplier's delivery note number).
pub const MAX_REFERENCE: usize = 200;
/// Longest rejection reason.
pub const MAX_REASON: usize = 500;
/// What a charge may be.
pub const CHARGE_KINDS: [&str; 4] = ["freight", "insurance", "clearing", "other"];

/// A delivery as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct GoodsReceivedRequest {
    #[schema(value_type = String, format = Uuid)]
    pub supplier_id: Uuid,
    /// Admins only: another branch (default the caller's).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// The order this delivery is for, when it is for one; lines may still
    /// name lines of other open orders of the same supplier and branch.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub purchase_order_id: Option<Uuid>,
    /// The supplier's delivery note number. Required.
    pub delivery_reference: String,
    pub lines: Vec<ReceivedLineRequest>,
    #[serde(default)]
    pub charges: Vec<ReceiptChargeRequest>,
}

/// One delivered line: what was accepted into stock and what was rejected.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ReceivedLineRequest {
    /// The order line this receives against (none: an unplanned receipt).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub purchase_order_line_id: Option<Uuid>,
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    /// An active pack of the medicine: quantities then count packs and
    /// `unit_cost` is per pack.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub pack_id: Option<Uuid>,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: NaiveDate,
    #[schema(value_type = Option<String>, format = Date)]
    pub manufacturing_date: Option<NaiveDate>,
    /// Accepted into stock (base units, or packs with `pack_id`); 0 when
    /// everything delivered was rejected.
    #[schema(value_type = f64, minimum = 0)]
    pub quantity_received: Decimal,
    /// Delivered but refused (damaged, short-dated, wrong item); needs
    /// `rejection_reason`. Rejected units stay outstanding on the order.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub quantity_rejected: Option<Decimal>,
    pub rejection_reason: Option<String>,
    /// Per base unit, or per pack with `pack_id` (at most 2 decimals).
    #[schema(value_type = f64, minimum = 0)]
    pub unit_cost: Decimal,
}

/// A cost of getting the delivery here, spread over its lines.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ReceiptChargeRequest {
    /// `freight`, `insurance`, `clearing` or `other`.
    pub kind: String,
    /// Above zero, at most 2 decimals.
    #[schema(value_type = f64, minimum = 0)]
    pub amount: Decimal,
}

/// A delivery checked for its shape.
#[derive(Debug, Clone)]
pub struct NewNote {
    pub supplier_id: Uuid,
    pub branch_id: Uuid,
    pub purchase_order_id: Option<Uuid>,
    pub delivery_reference: String,
    pub lines: Vec<NewLine>,
    /// `(kind, amount)`.
    pub charges: Vec<(String, Decimal)>,
    pub user_id: Uuid,
}

/// A line checked for its shape; quantities as sent (packs with a pack).
#[derive(Debug, Clone)]
pub struct NewLine {
    pub purchase_order_line_id: Option<Uuid>,
    pub medicine_id: Uuid,
    pub pack_id: Option<Uuid>,
    pub batch_number: String,
    pub expiry_date: NaiveDate,
    pub manufacturing_date: Option<NaiveDate>,
    pub received: i32,
    pub rejected: i32,
    pub rejection_reason: Option<String>,
    pub unit_cost: Decimal,
}

impl GoodsReceivedRequest {
    /// Checks the delivery's shape for `branch_id` (already scoped to the
    /// caller); parties, packs and order lines are checked in the
    /// transaction.
    pub fn validate(self, branch_id: Uuid, user_id: Uuid) -> Result<NewNote> {
        let delivery_reference = input::required_text(
            "delivery_reference",
            &self.delivery_reference,
            MAX_REFERENCE,
        )?;
        if self.lines.is_empty() {
            return Err(Error::validation(
                "lines",
                "A delivery needs at least one line.",
            ));
        }
        if self.lines.len() > MAX_LINES {
            return Err(Error::validation(
                "lines",
                format!("A delivery may have at most {MAX_LINES} lines."),
            ));
        }
        if self.charges.len() > MAX_CHARGES {
            return Err(Error::validation(
                "charges",
                format!("A delivery may have at most {MAX_CHARGES} charges."),
            ));
        }
        let lines = self
            .lines
            .into_iter()
            .enumerate()
            .map(|(i, l)| l.validate(i))
            .collect::<Result<Vec<_>>>()?;
        let charges = self
            .charges
            .into_iter()
            .enumerate()
            .map(|(i, c)| c.validate(i))
            .collect::<Result<Vec<_>>>()?;
        Ok(NewNote {
            supplier_id: self.supplier_id,
            branch_id,
            purchase_order_id: self.purchase_order_id,
            delivery_reference,
            lines,
            charges,
            user_id,
        })
    }
}

impl ReceivedLineRequest {
    fn validate(self, i: usize) -> Result<NewLine> {
        let field = |name: &str| format!("lines[{i}].{name}");
        let batch_number =
            input::required_text(&field("batch_number"), &self.batch_number, MAX_BATCH_NUMBER)?;
        let received = input::whole(&field("quantity_received"), self.quantity_received, 0)?;
        let rejected = match self.quantity_rejected {
            Some(q) => input::whole(&field("quantity_rejected"), q, 0)?,
            None => 0,
        };
        if received == 0 && rejected == 0 {
            return Err(Error::validation(
                field("quantity_received"),
                "A line must receive or reject something.",
            ));
        }
        let reason = input::text(
            &field("rejection_reason"),
            self.rejection_reason.as_deref().unwrap_or_default(),
            MAX_REASON,
        )?;
        let rejection_reason = match (rejected > 0, reason.is_empty()) {
            (true, true) => {
                return Err(Error::validation(
                    field("rejection_reason"),
                    "Rejected units need a `rejection_reason`.",
                ))
            }
            (false, false) => {
                return Err(Error::validation(
                    field("rejection_reason"),
                    "`rejection_reason` is for rejected units; this line rejects none.",
                ))
            }
            (true, false) => Some(reason),
            (false, true) => None,
        };
        if self
            .manufacturing_date
            .is_some_and(|made| made > self.expiry_date)
        {
            return Err(Error::validation(
                field("manufacturing_date"),
                "`manufacturing_date` must not be after `expiry_date`.",
            ));
        }
        Ok(NewLine {
            purchase_order_line_id: self.purchase_order_line_id,
            medicine_id: self.medicine_id,
            pack_id: self.pack_id,
            batch_number,
            expiry_date: self.expiry_date,
            manufacturing_date: self.manufacturing_date,
            received,
            rejected,
            rejection_reason,
            unit_cost: input::amount(&field("unit_cost"), self.unit_cost)?,
        })
    }
}

impl ReceiptChargeRequest {
    /// Checks the `i`th charge (400 naming `charges[i].kind` or `.amount`).
    pub fn validate(self, i: usize) -> Result<(String, Decimal)> {
        let kind = self.kind.trim().to_lowercase();
        if !CHARGE_KINDS.contains(&kind.as_str()) {
            return Err(Error::validation(
                format!("charges[{i}].kind"),
                "`kind` must be one of freight, insurance, clearing, other.",
            ));
        }
        let amount = input::positive_amount(&format!("charges[{i}].amount"), self.amount)?;
        Ok((kind, amount))
    }
}
