//! A medicine as stored, and its two read shapes: the single read (decimal
//! strings, booleans, live stock) and the snapshot (numbers, 0/1 flags).

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::{wire, Error, Result};

/// A catalogue row.
#[derive(Debug, Clone)]
pub struct Medicine {
    pub id: Uuid,
    pub name: String,
    pub generic_name: String,
    pub barcode: String,
    /// The base unit's GTIN as 14 digits.
    pub gtin: Option<String>,
    pub category: Option<String>,
    pub form: String,
    pub strength: String,
    pub unit: String,
    pub selling_price: Decimal,
    pub max_public_price: Decimal,
    pub low_stock_threshold: i32,
    pub requires_prescription: bool,
    pub is_controlled: bool,
    pub control_schedule: String,
    pub vat_category: String,
    pub requires_cold_chain: bool,
    pub regulator_registration_no: String,
    pub image_key: String,
    pub image_url: String,
    pub is_active: bool,
    pub is_deleted: bool,
    pub rev: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Live stock in the scope it was read for.
    pub stock_quantity: i64,
}

pub const COLUMNS: [&str; 25] = [
    "id",
    "name",
    "generic_name",
    "barcode",
    "gtin",
    "category",
    "form",
    "strength",
    "unit",
    "selling_price",
    "max_public_price",
    "low_stock_threshold",
    "requires_prescription",
    "is_controlled",
    "control_schedule",
    "vat_category",
    "requires_cold_chain",
    "regulator_registration_no",
    "image_key",
    "image_url",
    "is_active",
    "is_deleted",
    "rev",
    "created_at",
    "updated_at",
];

impl Medicine {
    pub fn from_row(r: &Row) -> Self {
        Medicine {
            id: r.get("id"),
            name: r.get("name"),
            generic_name: r.get("generic_name"),
            barcode: r.get("barcode"),
            gtin: r.get("gtin"),
            category: r.get("category"),
            form: r.get("form"),
            strength: r.get("strength"),
            unit: r.get("unit"),
            selling_price: r.get("selling_price"),
            max_public_price: r.get("max_public_price"),
            low_stock_threshold: r.get("low_stock_threshold"),
            requires_prescription: r.get("requires_prescription"),
            is_controlled: r.get("is_controlled"),
            control_schedule: r.get("control_schedule"),
            vat_category: r.get("vat_category"),
            requires_cold_chain: r.get("requires_cold_chain"),
            regulator_registration_no: r.get("regulator_registration_no"),
            image_key: r.get("image_key"),
            image_url: r.get("image_url"),
            is_active: r.get("is_active"),
            is_deleted: r.get("is_deleted"),
            rev: r.get("rev"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
            stock_quantity: r.try_get("stock_quantity").unwrap_or_default(),
        }
    }

    pub fn view(&self) -> MedicineView {
        MedicineView {
            id: self.id,
            name: self.name.clone(),
            generic_name: self.generic_name.clone(),
            barcode: self.barcode.clone(),
            gtin: self.gtin.clone(),
            category: self.category.clone().unwrap_or_default(),
            form: self.form.clone(),
            strength: self.strength.clone(),
            unit: self.unit.clone(),
            selling_price: self.selling_price,
            max_public_price: self.max_public_price,
            stock_quantity: self.stock_quantity,
            low_stock_threshold: self.low_stock_threshold,
            requires_prescription: self.requires_prescription,
            is_controlled: self.is_controlled,
            control_schedule: self.control_schedule.clone(),
            vat_category: self.vat_category.clone(),
            requires_cold_chain: self.requires_cold_chain,
            regulator_registration_no: self.regulator_registration_no.clone(),
            image_key: self.image_key.clone(),
            image_url: self.image_url.clone(),
            is_active: self.is_active,
            rev: self.rev,
            created_at: self.created_at,
            updated_at: self.updated_at,
            packs: None,
        }
    }

    /// The snapshot shape as a JSON object (sync payloads, conflicts).
    pub fn snapshot_json(&self) -> Result<serde_json::Value> {
        serde_json::to_value(self.snapshot()).map_err(Error::internal)
    }

    pub fn snapshot(&self) -> MedicineSnapshot {
        MedicineSnapshot {
            id: self.id,
            name: self.name.clone(),
            generic_name: self.generic_name.clone(),
            barcode: self.barcode.clone(),
            category: self.category.clone().unwrap_or_default(),
            form: self.form.clone(),
            strength: self.strength.clone(),
            unit: self.unit.clone(),
            selling_price: self.selling_price,
            stock_quantity: self.stock_quantity,
            low_stock_threshold: self.low_stock_threshold,
            requires_prescription: self.requires_prescription,
            is_controlled: self.is_controlled,
            control_schedule: self.control_schedule.clone(),
            vat_category: self.vat_category.clone(),
            requires_cold_chain: self.requires_cold_chain,
            regulator_registration_no: self.regulator_registration_no.clone(),
            max_public_price: self.max_public_price,
            image_key: self.image_key.clone(),
            image_url: self.image_url.clone(),
            is_active: self.is_active,
            is_deleted: self.is_deleted,
            rev: self.rev,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// The spec's single-read Medicine: prices as decimal strings, flags as
/// booleans, `stock_quantity` live. `max_public_price` "0.00" means no
/// ceiling is filed.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MedicineView {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub name: String,
    pub generic_name: String,
    pub barcode: String,
    /// The base unit's GTIN as 14 digits (a pack's is on the pack); null
    /// when it has none.
    pub gtin: Option<String>,
    /// Category slug ("" when none).
    pub category: String,
    pub form: String,
    pub strength: String,
    pub unit: String,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1500.00")]
    pub selling_price: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "2000.00")]
    pub max_public_price: Decimal,
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
    pub requires_prescription: bool,
    pub is_controlled: bool,
    pub control_schedule: String,
    /// `standard`, `zero` or `exempt`.
    pub vat_category: String,
    pub requires_cold_chain: bool,
    pub regulator_registration_no: String,
    pub image_key: String,
    pub image_url: String,
    pub is_active: bool,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
    /// The single read only (`GET /medicines/{id}`): the active packs,
    /// fewest units first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packs: Option<Vec<crate::packs::Pack>>,
}

/// The snapshot Medicine: numbers and 0/1 flags.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MedicineSnapshot {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub name: String,
    pub generic_name: String,
    pub barcode: String,
    pub category: String,
    pub form: String,
    pub strength: String,
    pub unit: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub selling_price: Decimal,
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub requires_prescription: bool,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_controlled: bool,
    pub control_schedule: String,
    pub vat_category: String,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub requires_cold_chain: bool,
    pub regulator_registration_no: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub max_public_price: Decimal,
    pub image_key: String,
    pub image_url: String,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_active: bool,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_deleted: bool,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}
