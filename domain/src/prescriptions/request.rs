//! A new prescription's body and its rules.

use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{NewItem, NewPrescription};
use crate::{input, Error, Result};

/// Most lines one prescription may carry.
/// Most lines one prescription may list.
pub const MAX_ITEMS: usize = 100;

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
                    1000,
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
                200,
            )?,
            patient_id_number: optional("patient_id_number", self.patient_id_number, 100)?,
            prescriber_name: optional("prescriber_name", self.prescriber_name, 200)?,
            prescriber_license: optional("prescriber_license", self.prescriber_license, 100)?,
            notes: input::multiline("notes", self.notes.as_deref().unwrap_or_default(), 2000)?,
            items: lines(self.items)?,
            created_by,
        })
    }
}
