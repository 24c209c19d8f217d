//! `POST /purchase-orders` and `PUT /purchase-orders/{id}` as a client
//! sends them, and the checks that need no database.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::input;
use crate::stock::cost;

/// Most lines one order may carry.
pub const MAX_LINES: usize = 200;
/// Longest note on an order (the database holds the same bound).
pub const MAX_NOTES: usize = input::max::NOTES;
/// Orders per page of `GET /purchase-orders` unless `page_size` says.
pub const PAGE_SIZE: i64 = 20;

/// A purchase order's header and lines, on create and on replace.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PurchaseOrderRequest {
    #[schema(value_type = String, format = Uuid)]
    pub supplier_id: Uuid,
    /// Admins only: another branch (default the caller's). An order never
    /// changes branch: on replace, if sent, it must be the order's.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// When the goods are expected, `YYYY-MM-DD`.
    #[schema(value_type = Option<String>, format = Date, example = "2026-12-01")]
    pub expected_date: Option<NaiveDate>,
    pub notes: Option<String>,
    /// What is ordered: at least one line, each (medicine, pack) once.
    pub lines: Vec<PurchaseOrderLineRequest>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PurchaseOrderLineRequest {
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    /// Whole number above 0: base units, or packs when `pack_id` is set.
    #[schema(value_type = f64, minimum = 1)]
    #[serde(deserialize_with = "input::json_number")]
    pub quantity: Decimal,
    /// Cost of one base unit, or of one pack when `pack_id` is set (a
    /// number or a decimal string, 0 or more, at most 4 decimals).
    #[schema(value_type = String, example = "1200.00")]
    pub unit_cost: Decimal,
    /// An active pack of the medicine.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub pack_id: Option<Uuid>,
}

/// An order checked for what needs no database.
#[derive(Debug, Clone)]
pub(super) struct NewOrder {
    pub supplier_id: Uuid,
    /// The branch the caller named (already scoped), if any.
    pub branch_id: Option<Uuid>,
    pub expected_date: Option<NaiveDate>,
    pub notes: String,
    pub lines: Vec<NewLine>,
}

#[derive(Debug, Clone)]
pub(super) struct NewLine {
    pub medicine_id: Uuid,
    pub pack_id: Option<Uuid>,
    /// Base units, or packs when a pack is named.
    pub quantity: i32,
    /// Per base unit, or per pack when a pack is named.
    pub unit_cost: Decimal,
}

/// A unit cost: 0 or more, at most 4 decimals (a batch's cost per base
/// unit has 4), below the largest amount.
pub(super) fn unit_cost(field: &str, value: Decimal) -> Result<Decimal> {
    let underflow = value.is_zero() && value.scale() > cost::PLACES;
    if value.is_sign_negative() && !value.is_zero() {
        return Err(Error::validation(
            field,
            format!("`{field}` must not be negative."),
        ));
    }
    if underflow
        || value.normalize().scale() > cost::PLACES
        || value >= Decimal::from(input::MAX_AMOUNT)
    {
        return Err(Error::validation(
            field,
            format!("`{field}` must be an amount with at most 4 decimals."),
        ));
    }
    Ok(value.normalize())
}

impl PurchaseOrderRequest {
    /// Checks the shape of the order (400 naming the field); supplier,
    /// medicines and packs are checked in the transaction.
    pub(super) fn validate(self, branch_id: Option<Uuid>) -> Result<NewOrder> {
        if self.lines.is_empty() {
            return Err(Error::validation(
                "lines",
                "An order needs at least one line.",
            ));
        }
        if self.lines.len() > MAX_LINES {
            return Err(Error::validation(
                "lines",
                format!("An order may have at most {MAX_LINES} lines."),
            ));
        }
        let mut lines: Vec<NewLine> = Vec::with_capacity(self.lines.len());
        for (i, l) in self.lines.into_iter().enumerate() {
            let quantity = input::quantity(&format!("lines[{i}].quantity"), l.quantity)?;
            let unit_cost = unit_cost(&format!("lines[{i}].unit_cost"), l.unit_cost)?;
            if lines
                .iter()
                .any(|o| o.medicine_id == l.medicine_id && o.pack_id == l.pack_id)
            {
                return Err(Error::validation(
                    format!("lines[{i}].medicine_id"),
                    "This medicine is already ordered in this pack; give its whole quantity on one line.",
                ));
            }
            lines.push(NewLine {
                medicine_id: l.medicine_id,
                pack_id: l.pack_id,
                quantity,
                unit_cost,
            });
        }
        Ok(NewOrder {
            supplier_id: self.supplier_id,
            branch_id,
            expected_date: self.expected_date,
            notes: input::multiline(
                "notes",
                self.notes.as_deref().unwrap_or_default(),
                MAX_NOTES,
            )?,
            lines,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn a_unit_cost_takes_four_places_and_no_sign() {
        assert_eq!(unit_cost("c", d("1.2350")).unwrap(), d("1.235"));
        assert_eq!(unit_cost("c", d("0")).unwrap(), d("0"));
        assert!(unit_cost("c", d("-0.01")).is_err());
        assert!(unit_cost("c", d("1.23456")).is_err());
        assert!(unit_cost("c", Decimal::from(input::MAX_AMOUNT)).is_err());
    }

    fn line(medicine: u128, pack: Option<u128>) -> PurchaseOrderLineRequest {
        PurchaseOrderLineRequest {
            medicine_id: Uuid::from_u128(medicine),
            quantity: Decimal::ONE,
            unit_cost: Decimal::ONE,
            pack_id: pack.map(Uuid::from_u128),
        }
    }

    fn order(lines: Vec<PurchaseOrderLineRequest>) -> PurchaseOrderRequest {
        PurchaseOrderRequest {
            supplier_id: Uuid::nil(),
            branch_id: None,
            expected_date: None,
            notes: None,
            lines,
        }
    }

    fn field(e: Error) -> String {
        match e {
            Error::Validation { field, .. } => field.unwrap_or_default(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_medicine_is_ordered_once_per_pack() {
        order(vec![line(1, None), line(1, Some(2))])
            .validate(None)
            .unwrap();
        let twice = order(vec![line(1, None), line(3, None), line(1, None)]);
        assert_eq!(
            field(twice.validate(None).unwrap_err()),
            "lines[2].medicine_id"
        );
        assert_eq!(field(order(vec![]).validate(None).unwrap_err()), "lines");
    }
}
