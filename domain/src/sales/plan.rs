//! Planning a sale: the reads and locks, FEFO picks, prices, VAT and coupons,
//! and every refusal, before anything is written.

use std::collections::HashMap;

use chrono::{DateTime, SubsecRound, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::Query;
use uuid::Uuid;

use super::model::SaleItem;
use super::prescription::{prescription, Dispense};
use super::request::NewSale;
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
}

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
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows
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
                },
            )
        })
        .collect())
}

/// The standard VAT rate from the settings (0 when tax is off).
pub async fn standard_rate<C: GenericClient + Sync>(c: &C) -> Result<Decimal> {
    let q = Query::select()
        .columns(["tax_enabled", "tax_rate"])
        .from("settings")
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
    pub(super) quantity: i32,
    pub(super) unit_price: Decimal,
    pub(super) cost: Decimal,
    pub(super) rate: Decimal,
    pub(super) gross: Decimal,
}

/// A sale read, locked, priced and checked, ready to write.
pub(super) struct Plan<'a> {
    pub(super) sale: &'a NewSale,
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
        self.coupon.is_some() || self.is_credit()
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
    check_catalogue(sale, &catalogue)?;
    let overrides = price_overrides(sale, &catalogue)?;
    let dispense = match (sale.prescription_id, needs_prescription(sale, &catalogue)) {
        (Some(id), _) => {
            let rx = prescription(tx, id, sale.branch_id).await?;
            Some(Dispense::check(rx, sale, &catalogue)?)
        }
        (None, Some(why)) => return Err(prescription_required(why)),
        (None, None) => None,
    };
    let mut lots = match locked {
        Some(lots) => lots,
        None => stock::lock_sellable(tx, sale.branch_id, &ids).await?,
    };
    let pieces = pick_pieces(sale, &catalogue, &mut lots, standard)?;
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

/// Every line names an active medicine.
pub(super) fn check_catalogue(sale: &NewSale, catalogue: &HashMap<Uuid, Product>) -> Result<()> {
    for (i, line) in sale.lines.iter().enumerate() {
        if !catalogue.contains_key(&line.medicine_id) {
            return Err(Error::validation(
                format!("items[{i}].medicine_id"),
                "This medicine does not exist or is not active.",
            ));
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
        match line.unit_price {
            Some(price) if price < product.selling_price => {
                if !Action::OverridePrice.permits(sale.role) {
                    return Err(Error::forbidden(format!(
                        "Selling {} at {}, below its selling price of {}, needs an admin, \
                         a branch manager or a pharmacist.",
                        product.name,
                        wire::two_places(price),
                        wire::two_places(product.selling_price)
                    )));
                }
                overrides.push(Override {
                    medicine_id: line.medicine_id,
                    quantity: line.quantity,
                    selling_price: product.selling_price,
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

/// Prices every line and picks its stock first-expiry-first-out from
/// `lots` (which it takes the quantities from). Call after
/// `check_catalogue`.
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
        let unit_price = line.unit_price.unwrap_or(product.selling_price);
        if product.max_public_price > Decimal::ZERO && unit_price > product.max_public_price {
            return Err(Error::validation(
                format!("items[{i}].unit_price"),
                format!(
                    "The price {} of {} is above its maximum public price of {}.",
                    wire::two_places(unit_price),
                    product.name,
                    wire::two_places(product.max_public_price)
                ),
            ));
        }
        let available = stock::available(lots, line.medicine_id);
        let picks = stock::pick(lots, line.medicine_id, line.quantity).ok_or_else(|| {
            Error::rule(
                Code::InsufficientStock,
                format!("items[{i}].quantity"),
                format!(
                    "Not enough sellable stock of {}: {} requested, {} available.",
                    product.name, line.quantity, available
                ),
            )
        })?;
        let rate = if product.vat_category == "standard" {
            standard
        } else {
            Decimal::ZERO
        };
        for (lot, qty) in picks {
            pieces.push(Piece {
                medicine_id: line.medicine_id,
                batch_id: lot.batch_id,
                quantity: qty,
                unit_price,
                cost: lot.unit_cost,
                rate,
                gross: unit_price * Decimal::from(qty),
            });
        }
    }
    Ok(pieces)
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
                quantity: p.quantity,
                unit_price: wire::two_places(p.unit_price),
                discount: wire::two_places(*discount),
                line_total: wire::two_places(line_total),
                vat_rate: percent(p.rate),
                vat_amount: vat_included(line_total, p.rate),
                cost_at_sale: wire::two_places(p.cost),
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
