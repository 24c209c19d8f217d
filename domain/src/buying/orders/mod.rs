//! Purchase orders: what a branch asks a supplier for. A buyer drafts one
//! (by hand or from the branch's reorder suggestions), submits it, a
//! manager other than the submitter approves it (or sends it back to
//! draft), the buyer sends it, and goods received notes fill it
//! (`sent` → `partially_received` → `received`); `close` ends a partly
//! received order, `cancel` one that received nothing.
//!
//! Every write runs in one transaction. A move locks the order row
//! (`SELECT … FOR UPDATE`) before it reads the state, so two moves at once
//! queue and the second sees the first's state (409). Numbers come from the
//! branch's counter row, bumped in the order's own transaction: unique and
//! gapless per branch whatever the number of server processes.
//!
//! Units: a line's quantities count base units; a line ordered by pack
//! keeps its `pack_id` and `pack_units`, its request `quantity` counted
//! packs and its `unit_cost` is per pack (as `POST /purchases` takes them).
//!
//! Where things are: `request` (the body and its checks), `read` (one
//! order, the list), `write` (create, replace), `moves` (the moves between
//! states) and `reorder` (an order drafted from the reorder suggestions).

mod moves;
mod read;
mod reorder;
mod request;
mod write;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::wire;

pub use moves::{move_order, Move};
pub use read::{get, list, ListFilter};
pub use reorder::{from_reorder, FromReorderRequest};
pub use request::{
    PurchaseOrderLineRequest, PurchaseOrderRequest, MAX_LINES, MAX_NOTES, PAGE_SIZE,
};
pub use write::{create, replace};

pub const DRAFT: &str = "draft";
pub const SUBMITTED: &str = "submitted";
pub const APPROVED: &str = "approved";
pub const SENT: &str = "sent";
pub const PARTIALLY_RECEIVED: &str = "partially_received";
pub const RECEIVED: &str = "received";
pub const CLOSED: &str = "closed";
pub const CANCELLED: &str = "cancelled";

/// Every state, in the order an order goes through them.
pub const STATUSES: [&str; 8] = [
    DRAFT,
    SUBMITTED,
    APPROVED,
    SENT,
    PARTIALLY_RECEIVED,
    RECEIVED,
    CLOSED,
    CANCELLED,
];

/// A purchase order as answered. Money as decimal strings.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PurchaseOrder {
    #[schema(value_type = String)]
    pub id: Uuid,
    /// `<BRANCH CODE>-PO-<6 digits>`, numbered per branch.
    #[schema(example = "KLA-PO-000042")]
    pub po_number: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = String)]
    pub supplier_id: Uuid,
    pub supplier_name: String,
    /// `draft`, `submitted`, `approved`, `sent`, `partially_received`,
    /// `received`, `closed` or `cancelled`.
    pub status: String,
    #[schema(value_type = Option<String>, format = Date, example = "2026-12-01")]
    pub expected_date: Option<NaiveDate>,
    pub notes: String,
    pub lines: Vec<PurchaseOrderLine>,
    /// Σ `line_total`.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1500.00")]
    pub total: Decimal,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    pub created_by_name: String,
    /// Who submitted it for approval (null in draft).
    #[schema(value_type = Option<String>)]
    pub submitted_by: Option<Uuid>,
    /// Who approved it (null until approved).
    #[schema(value_type = Option<String>)]
    pub approved_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

/// One line of a purchase order. Quantities count base units; a line
/// ordered by pack says so with `pack_id` and `pack_units` (`packs_ordered`
/// = `quantity_ordered` / `pack_units`), and its `unit_cost` is per pack.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PurchaseOrderLine {
    #[schema(value_type = String)]
    pub id: Uuid,
    /// 1, 2, … in the order sent.
    pub line_no: i32,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    /// The pack ordered (null for loose base units).
    #[schema(value_type = Option<String>)]
    pub pack_id: Option<Uuid>,
    /// Base units in one pack ordered (1 for loose base units).
    pub pack_units: i32,
    /// Packs ordered (base units when `pack_id` is null).
    pub packs_ordered: i32,
    /// Base units ordered.
    pub quantity_ordered: i32,
    /// Base units received (accepted) by posted goods received notes.
    pub quantity_received: i32,
    /// Base units delivered and rejected.
    pub quantity_rejected: i32,
    /// Base units billed by supplier invoices.
    pub quantity_invoiced: i32,
    /// Base units still awaited: ordered less received, never below 0;
    /// 0 once the order is closed or cancelled.
    pub outstanding: i32,
    /// Cost of one ordered unit: per pack when `pack_id` is set, else per
    /// base unit (2 decimals, or 4 for a cost taken from a batch).
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String, example = "1200.00")]
    pub unit_cost: Decimal,
    /// `packs_ordered` × `unit_cost`, to the cent.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1500.00")]
    pub line_total: Decimal,
}
