//! A made sale and its lines, as answered and stored.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A sale as read back. Money as decimal strings.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Sale {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// The branch's invoice counter value: gapless, unique, increasing.
    pub icv: i64,
    pub invoice_number: String,
    #[schema(value_type = Option<String>)]
    pub customer_id: Option<Uuid>,
    #[schema(value_type = Option<String>)]
    pub prescription_id: Option<Uuid>,
    pub coupon_code: Option<String>,
    pub payment_method: String,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub discount: Decimal,
    /// `total - vat`.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub subtotal: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub vat: Decimal,
    /// What the customer pays (VAT included, discount taken off).
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub total: Decimal,
    #[schema(value_type = Option<String>)]
    pub cash_session_id: Option<Uuid>,
    #[schema(value_type = Option<String>)]
    pub device_id: Option<Uuid>,
    pub client_mutation_id: Option<String>,
    pub status: String,
    pub previous_invoice_hash: String,
    pub invoice_hash: String,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    pub created_by_name: String,
    pub rev: i64,
    #[serde(with = "ts_micros")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    pub items: Vec<SaleItem>,
    /// What the tax authority made of the sale's invoice (`GET /sales/{id}`
    /// only; absent for sales older than the fiscal outbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fiscal: Option<crate::fiscal::read::FiscalStatus>,
}

/// One line of a sale as taken from one batch.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SaleItem {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    /// Packs for a line sold by the pack, else base units.
    pub quantity: i32,
    /// The pack sold (null for loose units).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub pack_id: Option<Uuid>,
    /// Base units in one of what `quantity` counts (1 for loose units).
    #[serde(default = "one")]
    pub pack_units: i32,
    /// Base units that left the batch: `quantity × pack_units`.
    #[serde(default)]
    pub base_quantity: i32,
    /// The serial of the scanned pack (null when none was scanned).
    #[serde(default)]
    pub serial: Option<String>,
    /// The GTIN (14 digits) the serial belongs to.
    #[serde(default)]
    pub gtin: Option<String>,
    /// Per pack for a pack line, else per base unit.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub unit_price: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub discount: Decimal,
    /// `quantity × unit_price − discount`, VAT included.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub line_total: Decimal,
    /// VAT rate in whole percent.
    pub vat_rate: i32,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub vat_amount: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub cost_at_sale: Decimal,
}

fn one() -> i32 {
    1
}

/// Timestamps of sales keep microseconds on the wire: the invoice hash
/// covers them, and a client should be able to recompute it.
mod ts_micros {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}
