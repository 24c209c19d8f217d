//! A sale's scanned lines read before planning: each code names the
//! medicine and pack, and the batch of this branch to sell when it names
//! one that may be sold.

use std::borrow::Cow;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::request::{NewSale, Scanned};
use crate::error::{Code, Error, Result};
use crate::scan;

/// Reads the sale's scanned lines (borrowed as it is when it has none):
/// each code's GTIN names the medicine and pack (agreeing with any given),
/// and a batch number this branch holds names the batch to sell, which
/// must be sellable. A serial needs a line of one.
pub(super) async fn resolve_scans<'a, C: GenericClient + Sync>(
    tx: &C,
    sale: &'a NewSale,
) -> Result<Cow<'a, NewSale>> {
    if sale.lines.iter().all(|l| l.scan.is_none()) {
        return Ok(Cow::Borrowed(sale));
    }
    let mut resolved = sale.clone();
    for (i, line) in resolved.lines.iter_mut().enumerate() {
        let Some(code) = line.scan.clone() else {
            continue;
        };
        let named = scan::name(tx, &code, &format!("items[{i}].scan")).await?;
        agree(i, "medicine_id", line.medicine_id, Some(named.medicine_id))?;
        if line.pack_id.is_some() {
            agree(
                i,
                "pack_id",
                line.pack_id.unwrap_or_default(),
                named.pack_id,
            )?;
        }
        line.medicine_id = named.medicine_id;
        line.pack_id = named.pack_id;
        if named.serial.is_some() && line.quantity != 1 {
            return Err(Error::validation(
                format!("items[{i}].quantity"),
                "A code with a serial names one pack: its line's quantity must be 1.",
            ));
        }
        let batch = match &named.batch_number {
            Some(number) => scan::batch(tx, sale.branch_id, named.medicine_id, number).await?,
            None => None,
        };
        if let Some(b) = &batch {
            if let Some(why) = unsellable(b, named.today) {
                return Err(Error::rule(
                    Code::BatchNotSellable,
                    format!("items[{i}].scan"),
                    format!(
                        "Batch {} of this code is {why}: it may not be sold.",
                        named.batch_number.clone().unwrap_or_default()
                    ),
                ));
            }
        }
        line.scanned = Some(Scanned {
            gtin: named.gtin,
            batch_id: batch.map(|b| b.id),
            serial: named.serial,
        });
    }
    Ok(Cow::Owned(resolved))
}

/// A field given beside `scan` must name what the code names (the nil id
/// is "not given").
fn agree(i: usize, field: &str, given: Uuid, named: Option<Uuid>) -> Result<()> {
    if given.is_nil() || Some(given) == named {
        return Ok(());
    }
    Err(Error::validation(
        format!("items[{i}].{field}"),
        format!("`{field}` does not name what the scanned code names."),
    ))
}

/// Why a scanned batch may not be sold, if it may not.
fn unsellable(b: &scan::ScannedBatch, today: chrono::NaiveDate) -> Option<&'static str> {
    if b.expiry_date < today || b.status == "expired" {
        Some("expired")
    } else if b.regulator_status == "recalled" {
        Some("recalled")
    } else if b.regulator_status == "quarantined" {
        Some("quarantined")
    } else {
        None
    }
}
