//! Receiving a purchased batch: the batch and its IN movement in one
//! transaction, through the branch's actor.
//!
//! A purchase may name a pack (`pack_id`): its `quantity` then counts packs
//! and its `unit_cost` is per pack. The batch still counts base units
//! (`quantity × units`) and keeps the cost per base unit to 4 places, plus
//! what the receipt cost in all (`received_total`, exact to the cent),
//! which the purchases report and the valuations at cost read.
//!
//! A purchase may carry `scan`, what a scanner read off the box: its GTIN
//! names the medicine and pack through the organisation's register (as
//! `GET /scan` reads it), and its batch, expiry and production date fill
//! those fields. A field also sent must agree with the code.
//!
//! Every receipt is also a goods received note: a one-line note posted at
//! once (origin `purchase`), so invoices match against it and the notes
//! list every receipt. The spec's rules stand: no shelf-life check here.

pub mod request;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use crate::buying::received;
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::fiscal;
use crate::stock::{self, cost, Batch, Kind, NewBatch};
use crate::{input, packs, scan, wire};
use actors::runtime::Command;
use request::Draft;

pub use request::{draft, PurchaseRequest};

/// The spec's 201 answer of `POST /purchases`, plus what was received in
/// packs.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReceivedBatch {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = Option<String>)]
    pub supplier_id: Option<Uuid>,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: chrono::NaiveDate,
    #[schema(value_type = Option<String>, format = Date)]
    pub manufacturing_date: Option<chrono::NaiveDate>,
    /// Base units.
    pub qty_received: i32,
    pub qty_remaining: i32,
    /// Cost per base unit: 2 decimals, or 4 where a pack's cost spread over
    /// its units has them (`"1.2350"`).
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String, example = "1200.00")]
    pub unit_cost: Decimal,
    pub status: String,
    pub regulator_status: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    pub medicine_name: String,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub medicine_selling_price: Decimal,
    pub supplier_name: String,
    pub is_deleted: bool,
    pub rev: i64,
    /// The pack received (null for loose base units).
    #[schema(value_type = Option<String>)]
    pub pack_id: Option<Uuid>,
    /// Base units in one pack received (1 for loose base units).
    pub pack_units: i32,
    /// Base units received: the packs received × `pack_units`.
    pub base_quantity: i32,
    /// What the receipt cost in all: quantity × unit cost as sent.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub received_total: Decimal,
}

/// A purchase to receive, checked for what needs no database
/// ([`request::draft`]); the rest is checked in its transaction.
pub struct ReceivePurchase {
    pub draft: Draft,
}

/// What the database says of a purchase's medicine, supplier and branch.
struct Parties {
    medicine_name: String,
    selling_price: Decimal,
    supplier_name: String,
}

async fn parties<C: GenericClient + Sync>(
    tx: &C,
    d: &Draft,
    medicine_id: Uuid,
    medicine_field: &str,
) -> Result<Parties> {
    let (supplier_id, branch_id) = (d.supplier_id, d.branch_id);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT m.name, m.selling_price,
                  (SELECT s.name FROM suppliers s
                    WHERE s.id = {supplier_id} AND NOT s.is_deleted) AS supplier_name,
                  EXISTS (SELECT 1 FROM branches br
                    WHERE br.id = {branch_id} AND NOT br.is_deleted) AS branch_ok
           FROM medicines m WHERE m.id = {medicine_id} AND NOT m.is_deleted"#
    );
    let row = db::raw_opt(tx, &q.sql, q.values).await?.ok_or_else(|| {
        Error::validation(
            medicine_field,
            format!("`{medicine_field}` names no medicine."),
        )
    })?;
    let supplier_name: Option<String> = row.get("supplier_name");
    let supplier_name = supplier_name
        .ok_or_else(|| Error::validation("supplier_id", "`supplier_id` names no supplier."))?;
    if !row.get::<_, bool>("branch_ok") {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` names no branch.",
        ));
    }
    Ok(Parties {
        medicine_name: row.get("name"),
        selling_price: row.get("selling_price"),
        supplier_name,
    })
}

/// The pack named, which must be an active pack of the medicine (400
/// naming `pack_id`): its id and units. Whether it is sold does not matter:
/// a box bought to be sold by the strip is still received as a box.
async fn pack<C: GenericClient + Sync>(
    tx: &C,
    medicine_id: Uuid,
    medicine_name: &str,
    pack_id: Uuid,
) -> Result<packs::Pack> {
    packs::get(tx, medicine_id, pack_id)
        .await?
        .filter(|p| p.is_active)
        .ok_or_else(|| {
            Error::validation(
                "pack_id",
                format!("`pack_id` names no active pack of {medicine_name}."),
            )
        })
}

/// Base units and the receipt's total for `quantity` at `unit_cost` in
/// packs of `units` (400 when they are beyond what one receipt holds).
fn amounts(quantity: i32, unit_cost: Decimal, units: i32) -> Result<(i32, Decimal)> {
    let base = i64::from(quantity) * i64::from(units);
    if base > input::MAX_QUANTITY {
        return Err(Error::validation(
            "quantity",
            format!(
                "{quantity} packs of {units} are {base} base units; one receipt takes at most {}.",
                input::MAX_QUANTITY
            ),
        ));
    }
    let total = Decimal::from(quantity) * unit_cost;
    if total >= Decimal::from(input::MAX_AMOUNT) {
        return Err(Error::validation(
            "unit_cost",
            format!(
                "`quantity` × `unit_cost` is {total}; one receipt must cost less than {}.",
                input::MAX_AMOUNT
            ),
        ));
    }
    Ok((base as i32, wire::two_places(total)))
}

impl Command for ReceivePurchase {
    type Error = crate::Error;
    type Output = ReceivedBatch;
    const NAME: &'static str = "receive_purchase";

    async fn run(self, pool: Pool) -> Result<ReceivedBatch> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let mut d = self.draft;
        let mut medicine_field = "medicine_id";
        if let Some(code) = d.scan.clone() {
            let named = scan::name(&tx, &code, "scan").await?;
            if d.medicine_id.is_none() {
                medicine_field = "scan";
            }
            request::fill(&mut d, &named)?;
        }
        let (Some(medicine_id), Some(batch_number), Some(expiry_date)) =
            (d.medicine_id, d.batch_number.clone(), d.expiry_date)
        else {
            return Err(Error::internal("a checked purchase lacks a field"));
        };
        let parties = parties(&tx, &d, medicine_id, medicine_field).await?;
        let pack = match d.pack_id {
            Some(id) => Some(pack(&tx, medicine_id, &parties.medicine_name, id).await?),
            None => None,
        };
        let units = pack.as_ref().map_or(1, |p| p.units);
        let (base_quantity, received_total) = amounts(d.quantity, d.unit_cost, units)?;
        let new = NewBatch {
            medicine_id,
            branch_id: d.branch_id,
            supplier_id: Some(d.supplier_id),
            batch_number,
            expiry_date,
            manufacturing_date: d.manufacturing_date,
            quantity: base_quantity,
            unit_cost: cost::per_unit(d.unit_cost, units),
            received_total,
            pack: pack.as_ref().map(|p| (p.id, p.units)),
            origin: "purchase",
            notes: d.notes,
            user_id: d.user_id,
        };
        let batch: Batch = stock::receive(&tx, new, Kind::In, None).await?;
        let purchase = received::Purchase {
            batch: &batch,
            pack: pack.as_ref().map(|p| (p.id, p.units)),
            unit_cost: d.unit_cost,
            received_total,
            user_id: d.user_id,
        };
        received::record_purchase(&tx, purchase).await?;
        // The stock increase for the tax authority, with the receipt.
        let increase = fiscal::payload::stock_increase(
            batch.id,
            batch.branch_id,
            &parties.supplier_name,
            batch.created_at,
            &[fiscal::payload::StockLine {
                medicine_id: batch.medicine_id,
                quantity: batch.qty_received,
                unit_cost: batch.unit_cost,
            }],
        );
        fiscal::outbox::enqueue(&tx, &[increase]).await?;
        crate::db::commit(tx).await?;
        Ok(answer(
            batch,
            parties,
            pack.map(|p| p.id),
            units,
            received_total,
        ))
    }
}

fn answer(
    batch: Batch,
    parties: Parties,
    pack_id: Option<Uuid>,
    pack_units: i32,
    received_total: Decimal,
) -> ReceivedBatch {
    ReceivedBatch {
        id: batch.id,
        medicine_id: batch.medicine_id,
        branch_id: batch.branch_id,
        supplier_id: batch.supplier_id,
        batch_number: batch.batch_number,
        expiry_date: batch.expiry_date,
        manufacturing_date: batch.manufacturing_date,
        qty_received: batch.qty_received,
        qty_remaining: batch.qty_remaining,
        unit_cost: batch.unit_cost,
        status: batch.status,
        regulator_status: batch.regulator_status,
        created_at: batch.created_at,
        medicine_name: parties.medicine_name,
        medicine_selling_price: parties.selling_price,
        supplier_name: parties.supplier_name,
        is_deleted: batch.is_deleted,
        rev: batch.rev,
        pack_id,
        pack_units,
        base_quantity: batch.qty_received,
        received_total,
    }
}
