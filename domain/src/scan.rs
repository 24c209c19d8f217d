//! `GET /scan`: what a scanned code names, for a branch. The code is read
//! by `gs1::read`; its GTIN is looked up in the organisation's register
//! (`product_gtins`: a medicine's base unit or one pack), else the code is
//! matched exactly against the medicines' in-house barcodes. When the code
//! names a batch, this branch's batch of that medicine with that number is
//! read with what a counter needs to know about it. Nothing is written.

use crate::tables::Table;
use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Order, Query};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{Code, Error, Result};
use crate::gs1::{self, Scanned};
use crate::medicines::{self, MedicineView};
use crate::packs::{self, Pack};
use crate::{db, stock};

/// What a scanned code names.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ScanResult {
    /// The code's GTIN as 14 digits (null for an in-house barcode).
    pub gtin: Option<String>,
    /// The medicine, as `GET /medicines/{id}` reads it for the branch.
    pub medicine: Option<MedicineView>,
    /// The pack the GTIN names (null for the base unit).
    pub pack: Option<Pack>,
    pub batch_number: Option<String>,
    /// `YYYY-MM-DD`; day `00` of the code is the month's last day.
    #[schema(value_type = Option<String>, format = Date)]
    pub expiry_date: Option<NaiveDate>,
    pub serial: Option<String>,
    /// This branch's batch of the medicine with the code's batch number.
    pub batch: Option<ScannedBatch>,
    /// Among `expired`, `quarantined`, `recalled`, `expiry_mismatch` (the
    /// code's expiry differs from the batch on record) and `not_stocked`
    /// (the branch holds none of it).
    pub warnings: Vec<String>,
}

/// A batch as a scan shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ScannedBatch {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub qty_remaining: i32,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: NaiveDate,
    pub status: String,
    pub regulator_status: String,
}

/// What the code says, before it is looked up.
struct Read {
    gtin: Option<gs1::Gtin>,
    in_house: Option<String>,
    batch_number: Option<String>,
    expiry: Option<NaiveDate>,
    production: Option<NaiveDate>,
    serial: Option<String>,
}

fn invalid(field: &str, e: &gs1::Malformed) -> Error {
    Error::rule(
        Code::InvalidBarcode,
        field,
        format!("The code cannot be read: {e}."),
    )
}

fn read(code: &str, field: &str, today: NaiveDate) -> Result<Read> {
    let scanned = gs1::read(code, gs1::this_year(today)).map_err(|e| invalid(field, &e))?;
    Ok(match scanned {
        Scanned::Gs1(e) => Read {
            gtin: e.gtin(),
            in_house: None,
            batch_number: e.batch().map(str::to_owned),
            expiry: e.expiry(),
            production: e.production(),
            serial: e.serial().map(str::to_owned),
        },
        Scanned::Gtin(g) => Read {
            gtin: Some(g),
            in_house: None,
            batch_number: None,
            expiry: None,
            production: None,
            serial: None,
        },
        Scanned::Other(text) => Read {
            gtin: None,
            in_house: Some(text),
            batch_number: None,
            expiry: None,
            production: None,
            serial: None,
        },
    })
}

/// The medicine and pack a code names: by GTIN, else by in-house barcode.
async fn product<C: GenericClient + Sync>(
    c: &C,
    r: &Read,
    code: &str,
    field: &str,
) -> Result<(Uuid, Option<Uuid>)> {
    if let Some(g) = &r.gtin {
        let gtin = g.to_string();
        let q = Query::select()
            .columns(["medicine_id", "pack_id"])
            .from(Table::ProductGtins)
            .and_where(Expr::col("gtin").eq(gtin.clone()))
            .to_owned();
        return db::fetch_opt(c, &q)
            .await?
            .map(|row| (row.get(0), row.get(1)))
            .ok_or_else(|| {
                Error::coded(
                    Code::UnknownGtin,
                    Some(field),
                    format!("GTIN {gtin} names no medicine or pack."),
                )
            });
    }
    let text = r.in_house.clone().unwrap_or_default();
    let q = Query::select()
        .column("id")
        .from(Table::Medicines)
        .and_where(Expr::col("barcode").eq(text.clone()))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    match db::fetch_opt(c, &q).await? {
        Some(row) => Ok((row.get(0), None)),
        None if gs1::gtin_shaped(&text) => Err(Error::rule(
            Code::InvalidBarcode,
            field,
            format!("The code cannot be read: {code} is not a GTIN (its check digit is wrong)."),
        )),
        None => Err(Error::coded(
            Code::UnknownGtin,
            Some(field),
            "The code names no medicine: it is no GTIN and no medicine's barcode.",
        )),
    }
}

/// Reads what `code` names for `branch_id`, today in the organisation's
/// time zone (expiry, and the century of two-digit years).
pub async fn scan<C: GenericClient + Sync>(
    c: &C,
    code: &str,
    branch_id: Uuid,
) -> Result<ScanResult> {
    let today = org_today(c).await?;
    let r = read(code, "code", today)?;
    let (medicine_id, pack_id) = product(c, &r, code, "code").await?;
    let medicine = medicines::get(c, medicine_id, Some(branch_id)).await?;
    let pack = match pack_id {
        Some(p) => packs::get(c, medicine_id, p).await?,
        None => None,
    };
    let batch = match &r.batch_number {
        Some(number) => batch(c, branch_id, medicine_id, number).await?,
        None => None,
    };
    let stocked = medicine.as_ref().is_some_and(|m| m.stock_quantity > 0);
    let warnings = warnings(batch.as_ref(), r.expiry, stocked, today);
    Ok(ScanResult {
        gtin: r.gtin.map(|g| g.to_string()),
        medicine: medicine.map(|m| m.view()),
        pack,
        batch_number: r.batch_number,
        expiry_date: r.expiry,
        serial: r.serial,
        batch,
        warnings,
    })
}

/// Today in the organisation's time zone.
async fn org_today<C: GenericClient + Sync>(c: &C) -> Result<NaiveDate> {
    let q = sea_query::raw_query!(PostgresQueryBuilder, "SELECT org_today()");
    db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| r.get(0))
        .ok_or_else(|| Error::internal("org_today() answered no row"))
}

/// What a code names, looked up, for a use case that acts on it (a sale
/// line, a receipt): the product and what the code says of the pack in
/// hand. Errors name `field`.
#[derive(Debug, Clone)]
pub struct Named {
    /// The GTIN as 14 digits (none for an in-house barcode).
    pub gtin: Option<String>,
    pub medicine_id: Uuid,
    pub pack_id: Option<Uuid>,
    pub batch_number: Option<String>,
    pub expiry: Option<NaiveDate>,
    /// The production date (AI 11).
    pub production: Option<NaiveDate>,
    pub serial: Option<String>,
    /// Today in the organisation's time zone.
    pub today: NaiveDate,
}

/// Reads `code` and looks up what it names: 400 `invalid_barcode` when it
/// cannot be read, `unknown_gtin` when nothing holds its GTIN or barcode.
pub async fn name<C: GenericClient + Sync>(c: &C, code: &str, field: &str) -> Result<Named> {
    let today = org_today(c).await?;
    let r = read(code, field, today)?;
    let (medicine_id, pack_id) = product(c, &r, code, field).await?;
    Ok(Named {
        gtin: r.gtin.map(|g| g.to_string()),
        medicine_id,
        pack_id,
        batch_number: r.batch_number,
        expiry: r.expiry,
        production: r.production,
        serial: r.serial,
        today,
    })
}

/// The branch's live batch of the medicine with this number (the latest
/// received when the number was received twice).
pub async fn batch<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
    medicine_id: Uuid,
    number: &str,
) -> Result<Option<ScannedBatch>> {
    let q = Query::select()
        .columns(stock::COLUMNS)
        .from(Table::Batches)
        .and_where(Expr::col("branch_id").eq(branch_id))
        .and_where(Expr::col("medicine_id").eq(medicine_id))
        .and_where(Expr::col("batch_number").eq(number))
        .and_where(Expr::col("is_deleted").eq(false))
        .order_by("created_at", Order::Desc)
        .limit(1)
        .to_owned();
    let found = db::fetch_opt(c, &q)
        .await?
        .map(|r| stock::Batch::from_row(&r));
    Ok(found.map(|b| ScannedBatch {
        id: b.id,
        qty_remaining: b.qty_remaining,
        expiry_date: b.expiry_date,
        status: b.status,
        regulator_status: b.regulator_status,
    }))
}

/// What a counter is warned of, in a fixed order.
fn warnings(
    batch: Option<&ScannedBatch>,
    code_expiry: Option<NaiveDate>,
    stocked: bool,
    today: NaiveDate,
) -> Vec<String> {
    let mut out = Vec::new();
    let expiry = batch.map(|b| b.expiry_date).or(code_expiry);
    if expiry.is_some_and(|e| e < today) || batch.is_some_and(|b| b.status == "expired") {
        out.push("expired");
    }
    if let Some(b) = batch {
        if b.regulator_status == "quarantined" {
            out.push("quarantined");
        }
        if b.regulator_status == "recalled" {
            out.push("recalled");
        }
        if code_expiry.is_some_and(|e| e != b.expiry_date) {
            out.push("expiry_mismatch");
        }
    }
    if !stocked || batch.is_some_and(|b| b.qty_remaining == 0) {
        out.push("not_stocked");
    }
    out.into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap_or_default()
    }

    fn held(expiry: NaiveDate, regulator: &str, qty: i32) -> ScannedBatch {
        ScannedBatch {
            id: Uuid::nil(),
            qty_remaining: qty,
            expiry_date: expiry,
            status: "active".to_owned(),
            regulator_status: regulator.to_owned(),
        }
    }

    #[test]
    fn warnings_name_what_a_counter_must_know() {
        let today = day(2026, 11, 25);
        let good = held(day(2027, 12, 31), "active", 5);
        assert!(warnings(Some(&good), Some(day(2027, 12, 31)), true, today).is_empty());
        assert_eq!(
            warnings(Some(&good), Some(day(2027, 11, 30)), true, today),
            ["expiry_mismatch"]
        );
        let old = held(day(2026, 1, 31), "recalled", 0);
        assert_eq!(
            warnings(Some(&old), None, true, today),
            ["expired", "recalled", "not_stocked"]
        );
        assert_eq!(
            warnings(None, Some(day(2025, 1, 31)), false, today),
            ["expired", "not_stocked"]
        );
    }
}
