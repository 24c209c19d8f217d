//! The sale request as a till or the REST API sends it, its validation, and
//! the checked sale a branch actor makes.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::idempotency::{Key, RequestDigest, Scope};
use crate::input;
use crate::role::Role;
use crate::users::sessions::Signer;

pub const PAYMENT_METHODS: [&str; 4] = ["cash", "card", "mobile_money", "credit"];

pub const MAX_LINES: usize = 200;

/// A sale as a client sends it (REST body or push payload).
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
pub struct SaleRequest {
    pub items: Vec<SaleLineRequest>,
    /// `cash`, `card`, `mobile_money` or `credit`.
    pub payment_method: String,
    #[schema(value_type = Option<String>)]
    pub customer_id: Option<Uuid>,
    /// A pending prescription of the branch. Required when a line is
    /// prescription-only or controlled; the sale may then sell only the
    /// medicines it lists, each up to what is left of it.
    #[schema(value_type = Option<String>)]
    pub prescription_id: Option<Uuid>,
    pub coupon_code: Option<String>,
    /// The client's id for this sale; a retry with the same id has one effect.
    pub client_mutation_id: Option<String>,
    /// Admins only: sell on another branch.
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
}

/// One line: a medicine (`medicine_id`, optionally `pack_id`) or a scanned
/// code (`scan`), and how many units (or packs) of it.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
pub struct SaleLineRequest {
    /// Required unless `scan` names the medicine.
    #[schema(value_type = Option<String>)]
    pub medicine_id: Option<Uuid>,
    /// An active sellable pack of the medicine: `quantity` then counts
    /// packs, each taken whole from one batch, first expiry first.
    #[schema(value_type = Option<String>)]
    pub pack_id: Option<Uuid>,
    /// A scanned code (GS1 element string, bare GTIN or in-house barcode)
    /// instead of `medicine_id`/`pack_id`: its GTIN names the medicine and
    /// pack, its batch (when this branch holds it) is the one sold, and its
    /// serial is recorded and dispensed once.
    // At most `MAX_SCAN` characters; the web layer documents the bound.
    pub scan: Option<String>,
    #[schema(value_type = f64, minimum = 1)]
    pub quantity: Decimal,
    /// Defaults to the medicine's selling price; never above `max_public_price`.
    /// Below the selling price (a price override) only for an admin, branch
    /// manager or pharmacist (403 otherwise), and written to the audit log.
    #[schema(value_type = Option<f64>)]
    pub unit_price: Option<Decimal>,
}

/// A validated sale to make.
#[derive(Debug, Clone)]
pub struct NewSale {
    pub branch_id: Uuid,
    pub user_id: Uuid,
    /// The seller's role: a price below the selling price needs
    /// `Action::OverridePrice`.
    pub role: Role,
    pub lines: Vec<Line>,
    pub payment_method: String,
    pub customer_id: Option<Uuid>,
    pub prescription_id: Option<Uuid>,
    pub coupon_code: Option<String>,
    pub device_id: Option<Uuid>,
    pub client_mutation_id: Option<String>,
    /// When the sale happened, if not now (a till that sold offline; demo data).
    pub occurred_at: Option<DateTime<Utc>>,
    /// The token to check with the sale's first statement, when the caller
    /// was not checked before (`POST /sales`).
    pub signer: Option<Signer>,
}

/// A line of a validated sale. A line given by `scan` carries the nil
/// medicine id until planning reads the code (`plan::resolve_scans`).
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub medicine_id: Uuid,
    pub pack_id: Option<Uuid>,
    /// Packs for a pack line, else base units.
    pub quantity: i32,
    pub unit_price: Option<Decimal>,
    pub scan: Option<String>,
    /// What the scan named, once read: the batch to sell and the serial.
    #[serde(skip)]
    pub scanned: Option<Scanned>,
}

impl Line {
    /// A line of loose units at the list price or `unit_price`.
    pub fn loose(medicine_id: Uuid, quantity: i32, unit_price: Option<Decimal>) -> Line {
        Line {
            medicine_id,
            pack_id: None,
            quantity,
            unit_price,
            scan: None,
            scanned: None,
        }
    }
}

/// What a line's scanned code said, once read.
#[derive(Debug, Clone)]
pub struct Scanned {
    pub gtin: Option<String>,
    /// This branch's batch with the code's number, when it holds one.
    pub batch_id: Option<Uuid>,
    pub serial: Option<String>,
}

/// The longest scanned code a line takes (a GS1 DataMatrix holds less).
pub const MAX_SCAN: usize = 500;

impl SaleRequest {
    /// Checks the shape of the request; stock, prices and people are checked
    /// in the transaction.
    pub fn validate(self, branch_id: Uuid, user_id: Uuid, role: Role) -> Result<NewSale> {
        if self.items.is_empty() {
            return Err(Error::validation(
                "items",
                "A sale needs at least one item.",
            ));
        }
        if self.items.len() > MAX_LINES {
            return Err(Error::validation(
                "items",
                format!("A sale may have at most {MAX_LINES} items."),
            ));
        }
        let mut lines = Vec::with_capacity(self.items.len());
        for (i, item) in self.items.into_iter().enumerate() {
            lines.push(line(i, item)?);
        }
        let method = self.payment_method.trim().to_lowercase();
        if !PAYMENT_METHODS.contains(&method.as_str()) {
            return Err(Error::validation(
                "payment_method",
                "`payment_method` must be one of cash, card, mobile_money, credit.",
            ));
        }
        if method == "credit" && self.customer_id.is_none() {
            return Err(Error::validation(
                "customer_id",
                "A credit sale needs a `customer_id`.",
            ));
        }
        let coupon_code = self
            .coupon_code
            .map(|c| input::text("coupon_code", &c, input::max::COUPON_CODE))
            .transpose()?
            .map(|c| c.to_uppercase())
            .filter(|c| !c.is_empty());
        let client_mutation_id = self
            .client_mutation_id
            .map(|c| input::text("client_mutation_id", &c, input::max::MUTATION_ID))
            .transpose()?
            .filter(|c| !c.is_empty());
        Ok(NewSale {
            branch_id,
            user_id,
            role,
            lines,
            payment_method: method,
            customer_id: self.customer_id,
            prescription_id: self.prescription_id,
            coupon_code,
            device_id: None,
            client_mutation_id,
            occurred_at: None,
            signer: None,
        })
    }
}

/// Checks one line's shape: a medicine or a scan, a whole quantity.
fn line(i: usize, item: SaleLineRequest) -> Result<Line> {
    let quantity = input::quantity(&format!("items[{i}].quantity"), item.quantity)?;
    let unit_price = item
        .unit_price
        .map(|p| input::amount(&format!("items[{i}].unit_price"), p))
        .transpose()?;
    // Not `input::text`: a GS1 code carries the group separator (ASCII 29)
    // between its fields, which the code reader handles.
    let scan = item
        .scan
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    if scan.as_ref().is_some_and(|c| c.chars().count() > MAX_SCAN) {
        return Err(Error::validation(
            format!("items[{i}].scan"),
            format!("A scanned code has at most {MAX_SCAN} characters."),
        ));
    }
    let medicine_id = match (item.medicine_id, &scan) {
        (Some(id), _) => id,
        (None, Some(_)) => Uuid::nil(),
        (None, None) => {
            return Err(Error::validation(
                format!("items[{i}].medicine_id"),
                "A line needs a `medicine_id` (or a `scan`).",
            ))
        }
    };
    Ok(Line {
        medicine_id,
        pack_id: item.pack_id,
        quantity,
        unit_price,
        scan,
        scanned: None,
    })
}

impl NewSale {
    /// Digest of what the client asked for, to tell a retry from a different
    /// sale reusing a mutation id.
    pub fn digest(&self) -> RequestDigest {
        RequestDigest::of_json(&serde_json::json!({
            "lines": self.lines,
            "payment_method": self.payment_method,
            "customer_id": self.customer_id,
            "prescription_id": self.prescription_id,
            "coupon_code": self.coupon_code,
        }))
    }

    /// The key a REST sale's mutation id holds in `sales`. A pushed sale
    /// (with a device) has none here: the push ledger keeps its key.
    pub fn key(&self) -> Option<Key<'_>> {
        if self.device_id.is_some() {
            return None;
        }
        Some(Key {
            table: "sales",
            scope: Scope::Branch(self.branch_id),
            client_mutation_id: self.client_mutation_id.as_deref()?,
        })
    }
}
