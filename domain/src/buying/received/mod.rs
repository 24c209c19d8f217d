//! Goods received notes: a delivery recorded as a draft, then posted as
//! batches at landed cost, all or nothing, on the branch's actor.
//!
//! A note's lines may receive against lines of any open order (`sent` or
//! `partially_received`) of the same supplier and branch, so one delivery
//! can fill several orders; a line without an order line is an unplanned
//! receipt. `quantity_received` is what was accepted into stock;
//! `quantity_rejected` was delivered and refused and stays outstanding on
//! its order. Quantities are stored and answered in base units; a line
//! received by pack says so with `pack_id` and `pack_units`.
//!
//! Posting (`post`) checks expiry and shelf life, locks the order lines in
//! one order, refuses a line that would receive more than is outstanding
//! (unless a manager allows an over-receipt), turns each accepted line into
//! a batch at its landed cost with an `IN` movement (the same ledger and
//! change feed as `POST /purchases`), and moves the orders' received
//! quantities and status. The note's charges are spread over its accepted
//! lines by value (`landed`), so Σ batch value = Σ lines + Σ charges.
//!
//! Where things are: `request` (the body and its shape checks), `landed`
//! (the spread of charges), `write` (drafting, replacing or discarding a
//! draft), `post` (posting it), `read` (one note and the list).

pub mod landed;
mod post;
mod read;
pub mod request;
mod write;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use crate::wire;

pub use post::{PostNote, PostOptions};
pub use read::{get, list, ListFilter};
pub use request::{GoodsReceivedRequest, NewNote, ReceiptChargeRequest, ReceivedLineRequest};
pub use write::{create, discard, record_purchase, replace, Purchase};

/// A goods received note as answered. Money as decimal strings.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct GoodsReceivedNote {
    #[schema(value_type = String)]
    pub id: Uuid,
    /// `<BRANCH CODE>-GRN-<6 digits>`, per branch.
    pub grn_number: String,
    /// `draft` or `posted`.
    pub status: String,
    #[schema(value_type = String)]
    pub supplier_id: Uuid,
    pub supplier_name: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = Option<String>)]
    pub purchase_order_id: Option<Uuid>,
    pub delivery_reference: String,
    /// `delivery`, or `purchase` for a receipt through `POST /purchases`
    /// (a one-line note posted at once).
    pub origin: String,
    pub lines: Vec<GoodsReceivedLine>,
    pub charges: Vec<Charge>,
    /// Σ line values (accepted quantity × unit cost).
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub lines_total: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub charges_total: Decimal,
    /// `lines_total + charges_total`: what the posted batches are worth.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total: Decimal,
    /// Recorded when a manager posted more than was outstanding.
    pub allow_over_receipt: bool,
    /// Recorded when a manager or pharmacist posted short-dated stock.
    pub accept_short_dated: bool,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[schema(value_type = Option<String>)]
    pub posted_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub posted_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

/// One line of a note. Quantities in base units.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct GoodsReceivedLine {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub line_no: i32,
    #[schema(value_type = Option<String>)]
    pub purchase_order_line_id: Option<Uuid>,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    #[schema(value_type = Option<String>)]
    pub pack_id: Option<Uuid>,
    /// Base units in one pack received (1 for loose units).
    pub pack_units: i32,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: NaiveDate,
    #[schema(value_type = Option<String>, format = Date)]
    pub manufacturing_date: Option<NaiveDate>,
    /// Accepted into stock, base units.
    pub quantity_received: i32,
    /// Refused at the door, base units.
    pub quantity_rejected: i32,
    pub rejection_reason: Option<String>,
    /// As sent: per base unit, or per pack with `pack_id`.
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String)]
    pub unit_cost: Decimal,
    /// Accepted packs (or units) × `unit_cost`.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub line_value: Decimal,
    /// The line's share of the note's charges.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub charge_share: Decimal,
    /// `line_value + charge_share`: what the batch received cost.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub landed_total: Decimal,
    /// Landed cost per base unit (4 places where it has them): the batch's
    /// `unit_cost`.
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String)]
    pub landed_unit_cost: Decimal,
    /// The batch the line became once posted (null before, and for a line
    /// that accepted nothing).
    #[schema(value_type = Option<String>)]
    pub batch_id: Option<Uuid>,
    /// Billed by supplier invoices so far, base units.
    pub quantity_invoiced: i32,
}

/// A charge of a note.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Charge {
    pub kind: String,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub amount: Decimal,
}
