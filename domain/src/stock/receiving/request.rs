//! `POST /purchases` as a client sends it, and the checks that need no
//! database: required fields, text, whole quantities, 2-place amounts, and
//! what a scanned code says against the fields sent with it.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::input;
use crate::scan::Named;

/// Longest batch number.
pub const MAX_BATCH_NUMBER: usize = input::max::LABEL;

/// The spec's body of `POST /purchases`, plus `pack_id` and `scan`.
/// `medicine_id`, `batch_number` and `expiry_date` are required unless
/// `scan` carries them.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PurchaseRequest {
    #[schema(value_type = String, format = Uuid)]
    pub supplier_id: Uuid,
    /// Required unless `scan` names the medicine.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub medicine_id: Option<Uuid>,
    #[schema(value_type = String, format = Uuid)]
    pub branch_id: Uuid,
    /// Required unless `scan` carries the batch (AI 10).
    pub batch_number: Option<String>,
    /// Required unless `scan` carries the expiry (AI 17).
    #[schema(value_type = Option<String>, format = Date)]
    pub expiry_date: Option<NaiveDate>,
    /// Positive whole number (a number or a numeric string): base units, or
    /// packs when the purchase names a pack.
    #[schema(value_type = f64, minimum = 1)]
    pub quantity: Decimal,
    /// Cost per base unit, or per pack when the purchase names a pack (a
    /// number or a decimal string, at most 2 decimals).
    #[schema(value_type = f64, minimum = 0)]
    pub unit_cost: Decimal,
    #[schema(value_type = Option<String>, format = Date)]
    pub manufacturing_date: Option<NaiveDate>,
    pub notes: Option<String>,
    /// An active pack of the medicine: `quantity` then counts packs and
    /// `unit_cost` is per pack. A scanned pack GTIN fills it.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub pack_id: Option<Uuid>,
    /// What a scanner read off the box (a GS1 DataMatrix or GS1-128 element
    /// string, a bare GTIN, or an in-house barcode): it fills `medicine_id`,
    /// `pack_id`, `batch_number`, `expiry_date` and `manufacturing_date`
    /// where it carries them, and a field also sent must agree with it.
    pub scan: Option<String>,
}

/// A purchase checked for what needs no database. Fields a scan may
/// still fill are open.
#[derive(Debug, Clone)]
pub struct Draft {
    pub supplier_id: Uuid,
    pub branch_id: Uuid,
    pub medicine_id: Option<Uuid>,
    pub pack_id: Option<Uuid>,
    pub batch_number: Option<String>,
    pub expiry_date: Option<NaiveDate>,
    pub manufacturing_date: Option<NaiveDate>,
    /// Base units, or packs when a pack is named.
    pub quantity: i32,
    /// Per base unit, or per pack when a pack is named; 2 places.
    pub unit_cost: Decimal,
    pub scan: Option<String>,
    pub notes: String,
    pub user_id: Uuid,
}

fn required(field: &str) -> Error {
    Error::validation(field, format!("The field `{field}` is required."))
}

/// Checks `body` for `branch_id` (already scoped to the caller), with the
/// same 400s as a request without `scan` always had.
pub fn draft(body: PurchaseRequest, branch_id: Uuid, user_id: Uuid) -> Result<Draft> {
    let scan = match body.scan {
        // The code goes to the GS1 reader as sent: its group separators
        // (character 29) are how FNC1 arrives, so no text check applies.
        Some(code) if code.trim().is_empty() => {
            return Err(Error::validation("scan", "`scan` must not be blank."))
        }
        Some(code) => Some(code),
        None => {
            if body.medicine_id.is_none() {
                return Err(required("medicine_id"));
            }
            if body.batch_number.is_none() {
                return Err(required("batch_number"));
            }
            if body.expiry_date.is_none() {
                return Err(required("expiry_date"));
            }
            None
        }
    };
    let batch_number = match body.batch_number {
        Some(b) => Some(input::required_text("batch_number", &b, MAX_BATCH_NUMBER)?),
        None => None,
    };
    let d = Draft {
        supplier_id: body.supplier_id,
        branch_id,
        medicine_id: body.medicine_id,
        pack_id: body.pack_id,
        batch_number,
        expiry_date: body.expiry_date,
        manufacturing_date: body.manufacturing_date,
        quantity: input::quantity("quantity", body.quantity)?,
        unit_cost: input::amount("unit_cost", body.unit_cost)?,
        scan,
        notes: input::multiline("notes", body.notes.as_deref().unwrap_or_default(), 2000)?,
        user_id,
    };
    dates_in_order(&d)?;
    Ok(d)
}

/// A batch is not made after it expires.
pub fn dates_in_order(d: &Draft) -> Result<()> {
    match (d.manufacturing_date, d.expiry_date) {
        (Some(made), Some(expiry)) if made > expiry => Err(Error::validation(
            "manufacturing_date",
            "`manufacturing_date` must not be after `expiry_date`.",
        )),
        _ => Ok(()),
    }
}

/// `field`, sent and scanned: they must agree (400 naming the field), and
/// either fills the other.
fn agree<T: PartialEq + std::fmt::Display + Clone>(
    field: &str,
    sent: &mut Option<T>,
    scanned: Option<&T>,
    what: &str,
) -> Result<()> {
    match (sent.as_ref(), scanned) {
        (Some(s), Some(c)) if s != c => Err(Error::validation(
            field,
            format!("`{field}` is {s}, but the scanned code's {what} is {c}."),
        )),
        (None, Some(c)) => {
            *sent = Some(c.clone());
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Fills `d` from what its scanned code names; a field also sent must
/// agree with the code (400 naming it). A code without a batch or an
/// expiry leaves those to the fields sent, which are then required.
pub fn fill(d: &mut Draft, named: &Named) -> Result<()> {
    if d.medicine_id.is_some_and(|m| m != named.medicine_id) {
        return Err(Error::validation(
            "medicine_id",
            "`medicine_id` names another medicine than the scanned code.",
        ));
    }
    d.medicine_id = Some(named.medicine_id);
    // A GTIN says which pack (or the base unit); an in-house barcode says
    // nothing of a pack, so `pack_id` stands as sent.
    if named.gtin.is_some() {
        match (d.pack_id, named.pack_id) {
            (Some(_), None) => {
                return Err(Error::validation(
                    "pack_id",
                    "The scanned code is the GTIN of the medicine's base unit, not of a pack: \
                     leave `pack_id` out or scan the pack.",
                ))
            }
            (Some(sent), Some(scanned)) if sent != scanned => {
                return Err(Error::validation(
                    "pack_id",
                    "`pack_id` names another pack than the scanned code.",
                ))
            }
            _ => d.pack_id = named.pack_id,
        }
    }
    agree(
        "batch_number",
        &mut d.batch_number,
        named.batch_number.as_ref(),
        "batch (AI 10)",
    )?;
    agree(
        "expiry_date",
        &mut d.expiry_date,
        named.expiry.as_ref(),
        "expiry (AI 17)",
    )?;
    agree(
        "manufacturing_date",
        &mut d.manufacturing_date,
        named.production.as_ref(),
        "production date (AI 11)",
    )?;
    if d.batch_number.is_none() {
        return Err(Error::validation(
            "batch_number",
            "The scanned code carries no batch number (AI 10): send `batch_number`.",
        ));
    }
    if d.expiry_date.is_none() {
        return Err(Error::validation(
            "expiry_date",
            "The scanned code carries no expiry date (AI 17): send `expiry_date`.",
        ));
    }
    dates_in_order(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    fn sent() -> Draft {
        Draft {
            supplier_id: Uuid::nil(),
            branch_id: Uuid::nil(),
            medicine_id: None,
            pack_id: None,
            batch_number: None,
            expiry_date: None,
            manufacturing_date: None,
            quantity: 5,
            unit_cost: Decimal::new(1235, 2),
            scan: Some("code".to_owned()),
            notes: String::new(),
            user_id: Uuid::nil(),
        }
    }

    fn boxed() -> Named {
        Named {
            gtin: Some("09501101530003".to_owned()),
            medicine_id: Uuid::from_u128(1),
            pack_id: Some(Uuid::from_u128(2)),
            batch_number: Some("AB-123".to_owned()),
            expiry: Some(day(2027, 12, 31)),
            production: None,
            serial: Some("SN0001".to_owned()),
            today: day(2026, 11, 25),
        }
    }

    fn field(e: Error) -> String {
        match e {
            Error::Validation { field, .. } => field.unwrap_or_default(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_scan_fills_what_was_not_sent() {
        let mut d = sent();
        fill(&mut d, &boxed()).unwrap();
        assert_eq!(d.medicine_id, Some(Uuid::from_u128(1)));
        assert_eq!(d.pack_id, Some(Uuid::from_u128(2)));
        assert_eq!(d.batch_number.as_deref(), Some("AB-123"));
        assert_eq!(d.expiry_date, Some(day(2027, 12, 31)));
        // The same values sent again agree.
        let mut again = d.clone();
        fill(&mut again, &boxed()).unwrap();
    }

    #[test]
    fn a_field_that_disagrees_with_the_scan_is_named() {
        type Change = fn(&mut Draft);
        let cases: [(&str, Change); 5] = [
            ("medicine_id", |d| d.medicine_id = Some(Uuid::from_u128(9))),
            ("pack_id", |d| d.pack_id = Some(Uuid::from_u128(9))),
            ("batch_number", |d| {
                d.batch_number = Some("AB-124".to_owned())
            }),
            ("expiry_date", |d| d.expiry_date = Some(day(2027, 11, 30))),
            ("manufacturing_date", |d| {
                d.manufacturing_date = Some(day(2028, 1, 1))
            }),
        ];
        for (name, change) in cases {
            let mut d = sent();
            change(&mut d);
            let e = fill(&mut d, &boxed()).unwrap_err();
            assert_eq!(field(e), name);
        }
    }

    #[test]
    fn a_scan_without_batch_or_expiry_needs_them_sent() {
        let mut bare = boxed();
        bare.batch_number = None;
        bare.expiry = None;
        assert_eq!(field(fill(&mut sent(), &bare).unwrap_err()), "batch_number");
        let mut d = sent();
        d.batch_number = Some("B-1".to_owned());
        assert_eq!(field(fill(&mut d, &bare).unwrap_err()), "expiry_date");
        d.expiry_date = Some(day(2028, 1, 31));
        fill(&mut d, &bare).unwrap();
    }

    #[test]
    fn a_base_unit_gtin_names_no_pack_and_an_in_house_code_leaves_the_pack_as_sent() {
        let mut unit = boxed();
        unit.pack_id = None;
        let mut d = sent();
        d.pack_id = Some(Uuid::from_u128(2));
        assert_eq!(field(fill(&mut d, &unit).unwrap_err()), "pack_id");
        unit.gtin = None;
        fill(&mut d, &unit).unwrap();
        assert_eq!(d.pack_id, Some(Uuid::from_u128(2)));
    }
}
