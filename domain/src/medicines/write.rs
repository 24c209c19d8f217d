//! Writing medicines: validation, create, edit and soft delete, price changes
//! audited, each write with its change-log row.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::Iden;
use serde::Deserialize;
use uuid::Uuid;

use super::categories::ensure_category;
use super::model::{Medicine, COLUMNS};
use super::read::{current, default_threshold};
use crate::audit;
use crate::input::{self, max, Flag};
use crate::patch::Patch;
use crate::sync::changes::{self, Change, Op};
use crate::sync::synced;
use crate::{wire, Error, Result};
use MedicineColumn as Col;

pub const VAT_CATEGORIES: [&str; 3] = ["standard", "zero", "exempt"];

/// Body of a create (`name` and `selling_price` required) or an update
/// (only the fields to change). Money as a number or a decimal string,
/// flags as booleans or 0/1.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct MedicineWrite {
    pub name: Option<String>,
    pub generic_name: Option<String>,
    /// A free in-house code (any text); it is not read as a GTIN.
    pub barcode: Option<String>,
    /// The base unit's GTIN-8, -12, -13 or -14 (valid check digit); one
    /// product per GTIN (409 `gtin_taken`); "" or null clears it.
    pub gtin: Option<String>,
    /// A category slug or name; unknown ones are added.
    pub category: Option<String>,
    pub form: Option<String>,
    pub strength: Option<String>,
    pub unit: Option<String>,
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub selling_price: Option<Decimal>,
    /// 0 or null: no ceiling.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub max_public_price: Option<Decimal>,
    /// Defaults to the settings' `default_low_stock_threshold`.
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub low_stock_threshold: Option<Decimal>,
    #[schema(value_type = Option<bool>)]
    pub requires_prescription: Option<Flag>,
    #[schema(value_type = Option<bool>)]
    pub is_controlled: Option<Flag>,
    pub control_schedule: Option<String>,
    /// `standard` (default), `zero` or `exempt`.
    pub vat_category: Option<String>,
    #[schema(value_type = Option<bool>)]
    pub requires_cold_chain: Option<Flag>,
    pub regulator_registration_no: Option<String>,
    pub image_key: Option<String>,
    pub image_url: Option<String>,
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Flag>,
}

/// Creates a medicine (`name` and `selling_price` required); `id` when the
/// client chose it. Its stock starts at 0.
pub async fn create<C: GenericClient + Sync>(
    tx: &C,
    body: MedicineWrite,
    id: Option<Uuid>,
) -> Result<Medicine> {
    let name = body
        .name
        .as_deref()
        .ok_or_else(|| Error::validation("name", "The field `name` is required."))?;
    input::required_text("name", name, max::NAME)?;
    let price = body.selling_price.ok_or_else(|| {
        Error::validation("selling_price", "The field `selling_price` is required.")
    })?;
    check_ceiling(price, body.max_public_price.unwrap_or_default())?;
    if let Some(g) = gtin_of(&body)? {
        crate::packs::gtin_free(tx, &g, id.unwrap_or_default(), None).await?;
    }
    let threshold_given = body.low_stock_threshold.is_some();
    let mut fields = fields(tx, body).await?;
    if !threshold_given {
        fields.set(Col::LowStockThreshold, default_threshold(tx).await?);
    }
    if let Some(id) = id {
        fields.set(Col::Id, id);
    }
    let mut medicine = insert(tx, fields).await?;
    medicine.stock_quantity = 0;
    Ok(medicine)
}

/// Applies the fields present in `body` to a live medicine. A price change
/// goes to the audit log.
pub async fn edit<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    body: MedicineWrite,
    actor: Uuid,
) -> Result<Medicine> {
    let current = current(tx, id)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    check_ceiling(
        body.selling_price.unwrap_or(current.selling_price),
        body.max_public_price.unwrap_or(current.max_public_price),
    )?;
    if let Some(g) = gtin_of(&body)? {
        crate::packs::gtin_free(tx, &g, id, None).await?;
    }
    let fields = fields(tx, body).await?;
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let medicine = update(tx, id, fields, Op::Update)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    audit_price_change(tx, &current, &medicine, actor).await?;
    Ok(medicine)
}

/// Soft-deletes (and deactivates) a live medicine.
pub async fn remove<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Medicine> {
    let mut fields = Fields::new();
    fields.set(Col::IsDeleted, true);
    fields.set(Col::IsActive, false);
    update(tx, id, fields, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))
}

pub(super) async fn audit_price_change<C: GenericClient + Sync>(
    tx: &C,
    before: &Medicine,
    after: &Medicine,
    actor: Uuid,
) -> Result<()> {
    if before.selling_price == after.selling_price
        && before.max_public_price == after.max_public_price
    {
        return Ok(());
    }
    let prices = |m: &Medicine| {
        serde_json::json!({
            "selling_price": wire::two_places(m.selling_price),
            "max_public_price": wire::two_places(m.max_public_price),
        })
    };
    // The catalogue is organisation-wide: every auditor reads it.
    audit::write_for(
        tx,
        None,
        audit::Entry {
            actor_id: Some(actor),
            action: "price_change",
            entity_type: "medicine",
            entity_id: after.id.to_string(),
            before: Some(prices(before)),
            after: Some(prices(after)),
        },
    )
    .await
}

/// A selling price above a filed ceiling is refused.
pub(super) fn check_ceiling(price: Decimal, ceiling: Decimal) -> Result<()> {
    if ceiling > Decimal::ZERO && price > ceiling {
        return Err(Error::validation(
            "selling_price",
            format!("The selling price {price} is above the maximum public price {ceiling}."),
        ));
    }
    Ok(())
}

/// The GTIN a write gives, as 14 digits (400 when it is not one).
fn gtin_of(body: &MedicineWrite) -> Result<Option<String>> {
    match &body.gtin {
        Some(v) => crate::packs::gtin_field("gtin", v),
        None => Ok(None),
    }
}

/// Validates the fields present in `body` into column values.
pub(super) async fn fields<C: GenericClient + Sync>(tx: &C, body: MedicineWrite) -> Result<Fields> {
    let mut f = Fields::new();
    if let Some(v) = &body.name {
        f.set(Col::Name, input::required_text("name", v, max::NAME)?);
    }
    for (col, v) in texts(&body) {
        if let Some(v) = v {
            f.set(col, input::text(col.unquoted(), v, text_limit(col))?);
        }
    }
    if body.gtin.is_some() {
        f.set(Col::Gtin, gtin_of(&body)?);
    }
    if let Some(v) = body.category {
        input::text("category", &v, max::LABEL)?;
        let slug = if v.trim().is_empty() {
            None
        } else {
            Some(ensure_category(tx, &v).await?)
        };
        f.set(Col::Category, slug);
    }
    if let Some(v) = body.selling_price {
        f.set(Col::SellingPrice, input::amount("selling_price", v)?);
    }
    if let Some(v) = body.max_public_price {
        f.set(Col::MaxPublicPrice, input::amount("max_public_price", v)?);
    }
    if let Some(v) = body.low_stock_threshold {
        f.set(
            Col::LowStockThreshold,
            input::whole("low_stock_threshold", v, 0)?,
        );
    }
    let flags = [
        (Col::RequiresPrescription, body.requires_prescription),
        (Col::IsControlled, body.is_controlled),
        (Col::RequiresColdChain, body.requires_cold_chain),
        (Col::IsActive, body.is_active),
    ];
    for (col, v) in flags {
        if let Some(Flag(b)) = v {
            f.set(col, b);
        }
    }
    if let Some(v) = body.vat_category {
        let v = v.trim().to_lowercase();
        if !VAT_CATEGORIES.contains(&v.as_str()) {
            return Err(Error::validation(
                "vat_category",
                "`vat_category` must be standard, zero or exempt.",
            ));
        }
        f.set(Col::VatCategory, v);
    }
    Ok(f)
}

/// The free-text columns of a medicine and the values a write gives them.
pub(super) fn texts(body: &MedicineWrite) -> [(MedicineColumn, Option<&String>); 9] {
    [
        (Col::GenericName, body.generic_name.as_ref()),
        (Col::Barcode, body.barcode.as_ref()),
        (Col::Form, body.form.as_ref()),
        (Col::Strength, body.strength.as_ref()),
        (Col::Unit, body.unit.as_ref()),
        (Col::ControlSchedule, body.control_schedule.as_ref()),
        (
            Col::RegulatorRegistrationNo,
            body.regulator_registration_no.as_ref(),
        ),
        (Col::ImageKey, body.image_key.as_ref()),
        (Col::ImageUrl, body.image_url.as_ref()),
    ]
}

/// The longest value each free-text column takes (the CHECKs of 0014).
pub(super) fn text_limit(col: MedicineColumn) -> usize {
    match col {
        Col::GenericName => max::NAME,
        Col::ControlSchedule => max::CODE,
        Col::ImageKey | Col::ImageUrl => max::URL,
        _ => max::LABEL,
    }
}

/// Checks a write's values without writing anything (names, texts and
/// their lengths, amounts, thresholds, the VAT category): what a pushed
/// update must pass before it may be kept as a conflict.
pub fn check(body: &MedicineWrite) -> Result<()> {
    if let Some(v) = &body.name {
        input::required_text("name", v, max::NAME)?;
    }
    for (col, v) in texts(body) {
        if let Some(v) = v {
            input::text(col.unquoted(), v, text_limit(col))?;
        }
    }
    if let Some(v) = &body.category {
        input::text("category", v, max::LABEL)?;
    }
    for (col, v) in [
        (Col::SellingPrice, body.selling_price),
        (Col::MaxPublicPrice, body.max_public_price),
    ] {
        if let Some(v) = v {
            input::amount(col.unquoted(), v)?;
        }
    }
    if let Some(v) = body.low_stock_threshold {
        input::whole("low_stock_threshold", v, 0)?;
    }
    if let Some(v) = &body.vat_category {
        if !VAT_CATEGORIES.contains(&v.trim().to_lowercase().as_str()) {
            return Err(Error::validation(
                "vat_category",
                "`vat_category` must be standard, zero or exempt.",
            ));
        }
    }
    Ok(())
}

/// The medicine columns a write sets.
#[derive(Iden, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MedicineColumn {
    Id,
    Name,
    GenericName,
    Barcode,
    Gtin,
    Category,
    Form,
    Strength,
    Unit,
    ControlSchedule,
    RegulatorRegistrationNo,
    ImageKey,
    ImageUrl,
    SellingPrice,
    MaxPublicPrice,
    LowStockThreshold,
    RequiresPrescription,
    IsControlled,
    RequiresColdChain,
    IsActive,
    IsDeleted,
    VatCategory,
}

/// Column values of a medicine write, already validated.
pub type Fields = Patch<MedicineColumn>;

pub async fn insert<C: GenericClient + Sync>(tx: &C, fields: Fields) -> Result<Medicine> {
    let (row, rev) = synced::insert(tx, Table::Medicines, &COLUMNS, fields)
        .await
        .map_err(duplicate_barcode)?;
    let medicine = Medicine::from_row(&row);
    emit(tx, rev, &medicine, Op::Create).await?;
    // Its goods registration for the tax authority.
    crate::fiscal::outbox::register_goods(tx, &[medicine.id]).await?;
    Ok(medicine)
}

/// Updates a live medicine (`delete` soft-deletes it); `None` when there is none.
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    fields: Fields,
    op: Op,
) -> Result<Option<Medicine>> {
    let updated = synced::update(tx, Table::Medicines, &COLUMNS, id, fields)
        .await
        .map_err(duplicate_barcode)?;
    let Some((row, rev)) = updated else {
        return Ok(None);
    };
    let mut medicine = Medicine::from_row(&row);
    medicine.stock_quantity = crate::stock::on_hand(tx, id, None).await?;
    emit(tx, rev, &medicine, op).await?;
    // A change the tax authority records (name, price, …) is registered
    // again as the goods' next revision; other changes queue nothing.
    crate::fiscal::outbox::register_goods(tx, &[medicine.id]).await?;
    Ok(Some(medicine))
}

pub(super) fn duplicate_barcode(e: Error) -> Error {
    match e {
        Error::Conflict(_) => Error::conflict("A medicine with this barcode already exists."),
        other => other,
    }
}

/// Medicine changes are organisation-wide; their `stock_quantity` is the
/// chain-wide stock at the time of the write (tills follow branch stock
/// through batch changes).
pub(super) async fn emit<C: GenericClient + Sync>(
    tx: &C,
    rev: i64,
    m: &Medicine,
    op: Op,
) -> Result<()> {
    let change = Change {
        entity: "medicine",
        entity_id: m.id.to_string(),
        op,
        branch_id: None,
        payload: m.snapshot_json()?,
    };
    changes::append(tx, rev, change).await
}
