//! A new prescription's body and its rules.

use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{NewItem, NewPrescription};
use crate::input::{self, max};
use crate::{Error, Result};

/// Most lines one prescription may list.
pub const MAX_ITEMS: usize = 100;

/// Longest patient id number and prescriber licence number, in characters
/// (twice the other codes' `input::max::CODE`, as the database allows).
pub const MAX_ID_NUMBER: usize = 100;

/// Longest dosage instruction on one line.
pub const MAX_DOSAGE: usize = 1000;

#[derive(Debug, Deserialize, ToSchema)]
pub struct PrescriptionItemWrite {
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    /// Whole units, 1 or more.
    #[schema(value_type = i64, minimum = 1)]
    pub quantity: Decimal,
    pub dosage_instructions: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PrescriptionCreate {
    /// Required, non-blank.
    pub patient_name: Option<String>,
    pub patient_id_number: Option<String>,
    pub prescriber_name: Option<String>,
    pub prescriber_license: Option<String>,
    pub notes: Option<String>,
    /// Admins only: the branch the prescription belongs to (default the caller's).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// At least one line, at most 100.
    pub items: Option<Vec<PrescriptionItemWrite>>,
}

fn optional(field: &str, value: Option<String>, max: usize) -> Result<String> {
    input::text(field, value.as_deref().unwrap_or_default(), max)
}

fn lines(items: Option<Vec<PrescriptionItemWrite>>) -> Result<Vec<NewItem>> {
    let items = items.unwrap_or_default();
    if items.is_empty() {
        return Err(Error::validation(
            "items",
            "A prescription needs at least one line in `items`.",
        ));
    }
    if items.len() > MAX_ITEMS {
        return Err(Error::validation(
            "items",
            format!("A prescription may have at most {MAX_ITEMS} lines."),
        ));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            Ok(NewItem {
                medicine_id: item.medicine_id,
                quantity: input::quantity(&format!("items[{i}].quantity"), item.quantity)?,
                dosage_instructions: optional(
                    &format!("items[{i}].dosage_instructions"),
                    item.dosage_instructions,
                    MAX_DOSAGE,
                )?,
            })
        })
        .collect()
}

impl PrescriptionCreate {
    /// The prescription to file on `branch_id` (already the caller's to
    /// name) by `created_by`: a patient name, at least one line and at most
    /// 100, each of whole units.
    pub fn into_new(self, branch_id: Uuid, created_by: Uuid) -> Result<NewPrescription> {
        Ok(NewPrescription {
            branch_id,
            patient_name: input::required_text(
                "patient_name",
                self.patient_name.as_deref().unwrap_or_default(),
                max::NAME,
            )?,
            patient_id_number: optional(
                "patient_id_number",
                self.patient_id_number,
                MAX_ID_NUMBER,
            )?,
            prescriber_name: optional("prescriber_name", self.prescriber_name, max::NAME)?,
            prescriber_license: optional(
                "prescriber_license",
                self.prescriber_license,
                MAX_ID_NUMBER,
            )?,
            notes: input::multiline(
                "notes",
                self.notes.as_deref().unwrap_or_default(),
                max::NOTES,
            )?,
            items: lines(self.items)?,
            created_by,
        })
    }
}
