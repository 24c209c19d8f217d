//! Planning a sale: the reads and locks, FEFO picks, prices, VAT and coupons,
//! and every refusal, before anything is written.

use crate::tables::Table;
use std::borrow::Cow;
use std::collections::HashMap;

use chrono::{DateTime, SubsecRound, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::Query;
use uuid::Uuid;

use super::model::SaleItem;
use super::prescription::{prescription, Dispense};
use super::request::{Line, NewSale};
use super::scanned::resolve_scans;
use super::write::user_name;
use crate::coupons::{self, Coupon};
use crate::customers;
use crate::db;
use crate::error::{Code, Error, Result};
use crate::role::Action;
use crate::stock;
use crate::wire;

/// A medicine as a sale needs it.
pub(super) struct Product {
    pub(super) name: String,
    pub(super) selling_price: Decimal,
    pub(super) max_public_price: Decimal,
    pub(super) vat_category: String,
    pub(super) requires_prescription: bool,
    pub(super) is_controlled: bool,
    pub(super) category: Option<String>,
    /// Its active packs.
    pub(super) packs: Vec<SalePack>,
}

/// An active pack as a sale needs it.
pub(super) struct SalePack {
    pub(super) id: Uuid,
    pub(super) name: String,
    pub(super) units: i32,
    /// The pack's own price, or `units ×` the medicine's selling price.
    pub(super) price: Decimal,
    pub(super) is_sellable: bool,
}

impl Product {
    pub(super) fn pack(&self, id: Uuid) -> Option<&SalePack> {
        self.packs.iter().find(|p| p.id == id)
    }

    /// Base units in one of what the line counts (1 for loose units).
    pub(super) fn units_of(&self, line: &Line) -> i32 {
        line.pack_id
            .and_then(|id| self.pack(id))
            .map_or(1, |p| p.units)
    }

    /// What one of what the line counts costs before any override.
    pub(super) fn list_price(&self, line: &Line) -> Decimal {
        line.pack_id
            .and_then(|id| self.pack(id))
            .map_or(self.selling_price, |p| p.price)
    }
}

/// The active medicines `ids` with their active packs: two statements,
/// pipelined.
pub(super) async fn products<C: GenericClient + Sync>(
    c: &C,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Product>> {
    let ids = ids.to_vec();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, name, selling_price, max_public_price, vat_category, requires_prescription,
                  is_controlled, category
           FROM medicines WHERE id = ANY({ids}) AND is_active AND NOT is_deleted"#
    );
    let p = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, medicine_id, name, units, selling_price, is_sellable FROM medicine_packs
           WHERE medicine_id = ANY({ids}) AND is_active AND NOT is_deleted"#
    );
    let (rows, pack_rows) = futures_util::try_join!(
        db::raw_all(c, &q.sql, q.values),
        db::raw_all(c, &p.sql, p.values)
    )?;
    let mut catalogue: HashMap<Uuid, Product> = rows
        .iter()
        .map(|r| {
            (
                r.get("id"),
                Product {
                    name: r.get("name"),
                    selling_price: r.get("selling_price"),
                    max_public_price: r.get("max_public_price"),
                    vat_category: r.get("vat_category"),
                    requires_prescription: r.get("requires_prescription"),
                    is_controlled: r.get("is_controlled"),
                    category: r.get("category"),
                    packs: Vec::new(),
                },
            )
        })
        .collect();
    for r in &pack_rows {
        let Some(product) = catalogue.get_mut(&r.get("medicine_id")) else {
            continue;
        };
        let units: i32 = r.get("units");
        let own: Option<Decimal> = r.get("selling_price");
        product.packs.push(SalePack {
            id: r.get("id"),
            name: r.get("name"),
            units,
            price: own.unwrap_or(product.selling_price * Decimal::from(units)),
            is_sellable: r.get("is_sellable"),
        });
    }
    Ok(catalogue)
}

/// The standard VAT rate from the settings (0 when tax is off).
pub async fn standard_rate<C: GenericClient + Sync>(c: &C) -> Result<Decimal> {
    let q = Query::select()
        .columns(["tax_enabled", "tax_rate"])
        .from(Table::Settings)
        .limit(1)
        .to_owned();
    Ok(match db::fetch_opt(c, &q).await? {
        Some(r) if r.get::<_, bool>("tax_enabled") => r.get("tax_rate"),
        _ => Decimal::ZERO,
    })
}

/// A line sold below its medicine's selling price.
pub(super) struct Override {
    pub(super) medicine_id: Uuid,
    pub(super) quantity: i32,
    pub(super) selling_price: Decimal,
    pub(super) unit_price: Decimal,
}

/// One priced piece of a sale: a line as taken from one batch.
pub(super) struct Piece {
    pub(super) medicine_id: Uuid,
    pub(super) batch_id: Uuid,
    /// Base units taken from the batch.
    pub(super) quantity: i32,
    pub(super) pack_id: Option<Uuid>,
    /// Base units per counted unit (1 for loose units).
    pub(super) pack_units: i32,
    /// The scanned pack's GTIN and serial, when its code carried a serial.
    pub(super) serial: Option<(String, String)>,
    pub(super) unit_price: Decimal,
    pub(super) cost: Decimal,
    pub(super) rate: Decimal,
    pub(super) gross: Decimal,
}

impl Piece {
    /// Packs (or loose units) this piece sold.
    pub(super) fn counted(&self) -> i32 {
        self.quantity / self.pack_units.max(1)
    }
}

/// A sale read, locked, priced and checked, ready to write.
pub(super) struct Plan<'a> {
    /// The sale with its scanned lines read (borrowed when it has none).
    pub(super) sale: Cow<'a, NewSale>,
    pub(super) catalogue: HashMap<Uuid, Product>,
    pub(super) pieces: Vec<Piece>,
    pub(super) items: Vec<SaleItem>,
    pub(super) coupon: Option<Coupon>,
    /// What the sale gives out against its prescription.
    pub(super) dispense: Option<Dispense>,
    /// Lines sold below the selling price, for the audit log.
    pub(super) overrides: Vec<Override>,
    pub(super) seller_name: String,
    pub(super) sale_id: Uuid,
    pub(super) created_at: DateTime<Utc>,
    pub(super) totals: Totals,
}

impl Plan<'_> {
    pub(super) fn may_refuse_while_writing(&self) -> bool {
        self.coupon.is_some() || self.is_credit() || self.pieces.iter().any(|p| p.serial.is_some())
    }

    pub(super) fn is_credit(&self) -> bool {
        self.sale.customer_id.is_some() && self.sale.payment_method == "credit"
    }
}

/// Reads, locks and checks everything a sale needs; writes nothing, so a
/// refusal here leaves the transaction as it found it.
pub(super) async fn prepare<'a, C: GenericClient + Sync>(
    tx: &C,
    sale: &'a NewSale,
) -> Result<Plan<'a>> {
    let sale = resolve_scans(tx, sale).await?;
    let mut ids: Vec<Uuid> = sale.lines.iter().map(|l| l.medicine_id).collect();
    ids.sort();
    ids.dedup();
    // Independent reads go out together: the driver pipelines them on the
    // transaction's connection (one round trip instead of four). The
    // batches are locked with them unless a prescription is to be locked
    // first (lock order: prescription, then batches).
    let lock_now = sale.prescription_id.is_none();
    let (catalogue, standard, seller_name, locked) = futures_util::try_join!(
        products(tx, &ids),
        standard_rate(tx),
        user_name(tx, sale.user_id),
        async {
            match lock_now {
                true => stock::lock_sellable(tx, sale.branch_id, &ids)
                    .await
                    .map(Some),
                false => Ok(None),
            }
        }
    )?;
    check_catalogue(&sale, &catalogue)?;
    let overrides = price_overrides(&sale, &catalogue)?;
    let dispense = match (sale.prescription_id, needs_prescription(&sale, &catalogue)) {
        (Some(id), _) => {
            let rx = prescription(tx, id, sale.branch_id).await?;
            Some(Dispense::check(rx, &sale, &catalogue)?)
        }
        (None, Some(why)) => return Err(prescription_required(why)),
        (None, None) => None,
    };
    let mut lots = match locked {
        Some(lots) => lots,
        None => stock::lock_sellable(tx, sale.branch_id, &ids).await?,
    };
    let pieces = pick_pieces(&sale, &catalogue, &mut lots, standard)?;
    let coupon = match &sale.coupon_code {
        Some(code) => Some(usable_coupon(tx, code).await?),
        None => None,
    };
    let discounts = match &coupon {
        Some(c) => {
            let lines: Vec<(Decimal, bool)> = pieces
                .iter()
                .map(|p| {
                    let category = catalogue[&p.medicine_id].category.as_deref();
                    (p.gross, c.covers(p.medicine_id, category))
                })
                .collect();
            let d = c.discounts(&lines);
            if d.iter().all(Decimal::is_zero) {
                return Err(Error::validation(
                    "coupon_code",
                    format!("Coupon {} does not apply to these items.", c.code),
                ));
            }
            d
        }
        None => vec![Decimal::ZERO; pieces.len()],
    };

    let sale_id = Uuid::now_v7();
    let created_at = sale.occurred_at.unwrap_or_else(Utc::now).trunc_subsecs(6);
    let items = line_items(&pieces, &discounts, &catalogue);
    let totals = totals(&items);

    // A cash or card sale's customer must exist (a credit customer is
    // checked when charged).
    if let (Some(id), false) = (sale.customer_id, sale.payment_method == "credit") {
        if customers::get(tx, id).await?.is_none() {
            return Err(Error::validation(
                "customer_id",
                "`customer_id` names no customer.",
            ));
        }
    }
    Ok(Plan {
        sale,
        catalogue,
        pieces,
        items,
        coupon,
        dispense,
        overrides,
        seller_name,
        sale_id,
        created_at,
        totals,
    })
}

/// Every line names an active medicine, and a pack line an active
/// sellable pack of it.
pub(super) fn check_catalogue(sale: &NewSale, catalogue: &HashMap<Uuid, Product>) -> Result<()> {
    for (i, line) in sale.lines.iter().enumerate() {
        let Some(product) = catalogue.get(&line.medicine_id) else {
            return Err(Error::validation(
                format!("items[{i}].medicine_id"),
                "This medicine does not exist or is not active.",
            ));
        };
        if let Some(id) = line.pack_id {
            match product.pack(id) {
                Some(p) if p.is_sellable => {}
                Some(p) => {
                    return Err(Error::validation(
                        format!("items[{i}].pack_id"),
                        format!("The {} of {} is not sold as a pack.", p.name, product.name),
                    ))
                }
                None => {
                    return Err(Error::validation(
                        format!("items[{i}].pack_id"),
                        format!("This is not an active pack of {}.", product.name),
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The lines priced below their selling price. Such a price is refused
/// unless the seller's role may override prices (before any lock is
/// waited for). Call after `check_catalogue`.
pub(super) fn price_overrides(
    sale: &NewSale,
    catalogue: &HashMap<Uuid, Product>,
) -> Result<Vec<Override>> {
    let mut overrides = Vec::new();
    for line in &sale.lines {
        let Some(product) = catalogue.get(&line.medicine_id) else {
            continue;
        };
        let list = product.list_price(line);
        match line.unit_price {
            Some(price) if price < list => {
                if !Action::OverridePrice.permits(sale.role) {
                    return Err(Error::forbidden(format!(
                        "Selling {} at {}, below its selling price of {}, needs an admin, \
                         a branch manager or a pharmacist.",
                        product.name,
                        wire::two_places(price),
                        wire::two_places(list)
                    )));
                }
                overrides.push(Override {
                    medicine_id: line.medicine_id,
                    quantity: line.quantity,
                    selling_price: list,
                    unit_price: price,
                });
            }
            _ => {}
        }
    }
    Ok(overrides)
}

/// Why the sale needs a prescription, if it does: a controlled medicine
/// always does, whatever its `requires_prescription` flag says.
pub(super) fn needs_prescription(
    sale: &NewSale,
    catalogue: &HashMap<Uuid, Product>,
) -> Option<String> {
    sale.lines.iter().find_map(|l| {
        let p = catalogue.get(&l.medicine_id)?;
        match (p.is_controlled, p.requires_prescription) {
            (true, _) => Some(format!("{} is a controlled medicine", p.name)),
            (false, true) => Some(format!("{} is prescription-only", p.name)),
            _ => None,
        }
    })
}

pub(super) fn prescription_required(why: String) -> Error {
    Error::rule(
        Code::PrescriptionRequired,
        "prescription_id",
        format!("{why}: give the `prescription_id` of a pending prescription that lists it."),
    )
}

/// Prices every line and picks its stock from `lots` (which it takes the
/// quantities from): a scanned batch when the line names one, else first
/// expiry first, a pack line in whole packs. Call after `check_catalogue`.
pub(super) fn pick_pieces(
    sale: &NewSale,
    catalogue: &HashMap<Uuid, Product>,
    lots: &mut [stock::Lot],
    standard: Decimal,
) -> Result<Vec<Piece>> {
    let mut pieces = Vec::new();
    for (i, line) in sale.lines.iter().enumerate() {
        let product = catalogue
            .get(&line.medicine_id)
            .ok_or_else(|| Error::internal("a line's medicine left the catalogue"))?;
        let units = product.units_of(line);
        let unit_price = line.unit_price.unwrap_or_else(|| product.list_price(line));
        let ceiling = product.max_public_price * Decimal::from(units);
        if ceiling > Decimal::ZERO && unit_price > ceiling {
            return Err(Error::validation(
                format!("items[{i}].unit_price"),
                format!(
                    "The price {} of {} is above its maximum public price of {}.",
                    wire::two_places(unit_price),
                    product.name,
                    wire::two_places(ceiling)
                ),
            ));
        }
        let picks = pick_line(i, line, product, units, lots)?;
        let rate = if product.vat_category == "standard" {
            standard
        } else {
            Decimal::ZERO
        };
        let serial = line
            .scanned
            .as_ref()
            .and_then(|s| match (&s.gtin, &s.serial) {
                (Some(g), Some(n)) => Some((g.clone(), n.clone())),
                _ => None,
            });
        for (lot, qty) in picks {
            pieces.push(Piece {
                medicine_id: line.medicine_id,
                batch_id: lot.batch_id,
                quantity: qty,
                pack_id: line.pack_id,
                pack_units: units,
                serial: serial.clone(),
                unit_price,
                cost: lot.unit_cost,
                rate,
                gross: unit_price * Decimal::from(qty / units),
            });
        }
    }
    Ok(pieces)
}

/// What one line takes from the lots, or why it cannot.
fn pick_line(
    i: usize,
    line: &Line,
    product: &Product,
    units: i32,
    lots: &mut [stock::Lot],
) -> Result<Vec<(stock::Lot, i32)>> {
    let field = format!("items[{i}].quantity");
    let base = line.quantity.saturating_mul(units);
    let what = match line.pack_id.and_then(|id| product.pack(id)) {
        Some(p) => format!(
            "{} × {} of {} ({} units each)",
            line.quantity, p.name, product.name, units
        ),
        None => format!("{} of {}", line.quantity, product.name),
    };
    if let Some(batch_id) = line.scanned.as_ref().and_then(|s| s.batch_id) {
        return stock::pick_batch(lots, batch_id, base).ok_or_else(|| {
            Error::rule(
                Code::InsufficientStock,
                field,
                format!("The scanned batch does not hold {what}: {base} units are needed."),
            )
        });
    }
    if units > 1 {
        let whole = stock::whole_packs(lots, line.medicine_id, units);
        return stock::pick_whole(lots, line.medicine_id, units, line.quantity).ok_or_else(|| {
            Error::rule(
                Code::InsufficientStock,
                field,
                format!(
                    "Not enough sellable stock for {what}: each pack is taken whole from one \
                     batch of at least {units} units, and the batches hold {whole} whole packs."
                ),
            )
        });
    }
    let available = stock::available(lots, line.medicine_id);
    stock::pick(lots, line.medicine_id, line.quantity).ok_or_else(|| {
        Error::rule(
            Code::InsufficientStock,
            field,
            format!(
                "Not enough sellable stock of {}: {} requested, {} available.",
                product.name, line.quantity, available
            ),
        )
    })
}

/// The sale's lines as answered, from its pieces and their discounts.
pub(super) fn line_items(
    pieces: &[Piece],
    discounts: &[Decimal],
    catalogue: &HashMap<Uuid, Product>,
) -> Vec<SaleItem> {
    pieces
        .iter()
        .zip(discounts)
        .map(|(p, discount)| {
            // The discount comes off the VAT-inclusive gross; the VAT is
            // what the rest (what is paid) contains.
            let line_total = p.gross - discount;
            SaleItem {
                id: Uuid::now_v7(),
                medicine_id: p.medicine_id,
                medicine_name: catalogue
                    .get(&p.medicine_id)
                    .map(|m| m.name.clone())
                    .unwrap_or_default(),
                batch_id: p.batch_id,
                quantity: p.counted(),
                pack_id: p.pack_id,
                pack_units: p.pack_units,
                base_quantity: p.quantity,
                serial: p.serial.as_ref().map(|(_, n)| n.clone()),
                gtin: p.serial.as_ref().map(|(g, _)| g.clone()),
                unit_price: wire::two_places(p.unit_price),
                discount: wire::two_places(*discount),
                line_total: wire::two_places(line_total),
                vat_rate: percent(p.rate),
                vat_amount: vat_included(line_total, p.rate),
                // A batch received by pack may cost 4 places a unit.
                cost_at_sale: wire::cost_places(p.cost),
            }
        })
        .collect()
}

/// The VAT an amount at `rate` (0.18 for 18 %) contains, VAT included:
/// `amount × rate / (1 + rate)`, rounded half up to 2 places. Applied per
/// line, so a sale's VAT is the sum of its lines' rounded VAT.
pub(super) fn vat_included(amount: Decimal, rate: Decimal) -> Decimal {
    wire::two_places(amount * rate / (Decimal::ONE + rate))
}

/// A sale's figures, from its lines (each already rounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Totals {
    pub(super) discount: Decimal,
    /// `total − vat`.
    pub(super) subtotal: Decimal,
    pub(super) vat: Decimal,
    /// What the customer pays: the lines' totals, VAT included.
    pub(super) total: Decimal,
}

pub(super) fn totals(items: &[SaleItem]) -> Totals {
    let total: Decimal = items.iter().map(|i| i.line_total).sum();
    let vat: Decimal = items.iter().map(|i| i.vat_amount).sum();
    let discount: Decimal = items.iter().map(|i| i.discount).sum();
    Totals {
        discount: wire::two_places(discount),
        subtotal: wire::two_places(total - vat),
        vat: wire::two_places(vat),
        total: wire::two_places(total),
    }
}

/// A rate (0.18) as whole percent (18), half away from zero.
pub(super) fn percent(rate: Decimal) -> i32 {
    use rust_decimal::prelude::ToPrimitive;
    (rate * Decimal::ONE_HUNDRED)
        .round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
        .to_i32()
        .unwrap_or_default()
}

pub(super) async fn usable_coupon<C: GenericClient + Sync>(tx: &C, code: &str) -> Result<Coupon> {
    let coupon = coupons::by_code(tx, code)
        .await?
        .ok_or_else(|| Error::validation("coupon_code", format!("There is no coupon {code}.")))?;
    coupons::check_usable(&coupon, Utc::now())?;
    Ok(coupon)
}
