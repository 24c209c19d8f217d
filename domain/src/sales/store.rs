//! The one writer of sale rows. A made sale is assembled here from its
//! request and what it took (its number, lines, totals, session, rev), and
//! stored here: the sales, their lines, their stock movements and their
//! price-override audit entries, each one statement of constant text
//! (`unnest` arrays) for one sale or a run of many. The one-sale path
//! (`write`) and the set-based run (`group`) both go through these
//! functions, so a column added to `sales` is added once.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use tokio_postgres::Row;
use uuid::Uuid;

use super::chain::invoice_hash;
use super::model::{Sale, SaleItem};
use super::plan::{Override, Piece, Totals};
use super::request::NewSale;
use crate::db::Stmt;
use crate::stock::{self, Kind, Movement};
use crate::wire;

/// The branch's invoice counter as a sale finds it: its last number, that
/// invoice's hash and the branch's code.
pub(super) struct Counter {
    pub(super) icv: i64,
    pub(super) previous_hash: String,
    pub(super) branch_code: String,
}

impl Counter {
    /// From a row of `(last_icv, last_hash, code)`.
    pub(super) fn from_row(r: &Row) -> Counter {
        Counter {
            icv: r.get(0),
            previous_hash: r.get(1),
            branch_code: r.get(2),
        }
    }
}

/// What a sale took that its request does not say.
pub(super) struct Taken {
    pub(super) id: Uuid,
    /// Its number: the counter's next value.
    pub(super) icv: i64,
    pub(super) items: Vec<SaleItem>,
    pub(super) totals: Totals,
    /// The coupon as stored (its code in the coupon's own spelling).
    pub(super) coupon_code: Option<String>,
    pub(super) cash_session_id: Option<Uuid>,
    pub(super) seller_name: String,
    /// Its change-log rev; 0 when allocated later (a run's come after its
    /// batches').
    pub(super) rev: i64,
    pub(super) created_at: DateTime<Utc>,
}

/// The sale as it is stored and answered: numbered `t.icv` with the
/// branch's code and chained to the invoice before it (both from `counter`).
pub(super) fn assemble(sale: &NewSale, counter: &Counter, t: Taken) -> Sale {
    let mut made = Sale {
        id: t.id,
        branch_id: sale.branch_id,
        icv: t.icv,
        invoice_number: format!("{}-{:08}", counter.branch_code, t.icv),
        customer_id: sale.customer_id,
        prescription_id: sale.prescription_id,
        coupon_code: t.coupon_code,
        payment_method: sale.payment_method.clone(),
        discount: t.totals.discount,
        subtotal: t.totals.subtotal,
        vat: t.totals.vat,
        total: t.totals.total,
        cash_session_id: t.cash_session_id,
        device_id: sale.device_id,
        client_mutation_id: sale.client_mutation_id.clone(),
        status: "completed".to_owned(),
        previous_invoice_hash: counter.previous_hash.clone(),
        invoice_hash: String::new(),
        created_by: sale.user_id,
        created_by_name: t.seller_name,
        rev: t.rev,
        created_at: t.created_at,
        items: t.items,
        fiscal: None,
    };
    made.invoice_hash = invoice_hash(&made, t.created_at);
    made
}

/// A made sale with what its row stores besides the answer.
pub(super) struct Stored<'a> {
    pub(super) sale: &'a Sale,
    /// What tells a retry of its mutation id from another sale.
    pub(super) digest: String,
    pub(super) coupon_id: Option<Uuid>,
}

/// Text for an optional value in a text array ('' for none).
fn opt_text(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The `sales` rows of `rows`, in one statement of constant text.
pub(super) fn sales_stmt(rows: &[Stored<'_>]) -> Stmt {
    let s = |f: &dyn Fn(&Stored<'_>) -> String| rows.iter().map(f).collect::<Vec<String>>();
    let ids: Vec<Uuid> = rows.iter().map(|r| r.sale.id).collect();
    let branches: Vec<Uuid> = rows.iter().map(|r| r.sale.branch_id).collect();
    let icvs: Vec<i64> = rows.iter().map(|r| r.sale.icv).collect();
    let numbers = s(&|r| r.sale.invoice_number.clone());
    let customers = s(&|r| opt_text(r.sale.customer_id));
    let prescriptions = s(&|r| opt_text(r.sale.prescription_id));
    let coupons = s(&|r| opt_text(r.coupon_id));
    let coupon_codes = s(&|r| r.sale.coupon_code.clone().unwrap_or_default());
    let has_coupon: Vec<bool> = rows.iter().map(|r| r.sale.coupon_code.is_some()).collect();
    let methods = s(&|r| r.sale.payment_method.clone());
    let gross = s(&|r| (r.sale.total + r.sale.discount).to_string());
    let discount = s(&|r| r.sale.discount.to_string());
    let subtotal = s(&|r| r.sale.subtotal.to_string());
    let vat = s(&|r| r.sale.vat.to_string());
    let total = s(&|r| r.sale.total.to_string());
    let sessions = s(&|r| opt_text(r.sale.cash_session_id));
    let devices = s(&|r| opt_text(r.sale.device_id));
    let cmids = s(&|r| r.sale.client_mutation_id.clone().unwrap_or_default());
    let has_cmid: Vec<bool> = rows
        .iter()
        .map(|r| r.sale.client_mutation_id.is_some())
        .collect();
    let digests = s(&|r| r.digest.clone());
    let previous = s(&|r| r.sale.previous_invoice_hash.clone());
    let hashes = s(&|r| r.sale.invoice_hash.clone());
    let creators: Vec<Uuid> = rows.iter().map(|r| r.sale.created_by).collect();
    let revs: Vec<i64> = rows.iter().map(|r| r.sale.rev).collect();
    let created = s(&|r| r.sale.created_at.to_rfc3339());
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO sales
             (id, branch_id, icv, invoice_number, customer_id, prescription_id, coupon_id,
              coupon_code, payment_method, gross, discount, subtotal, vat, total,
              cash_session_id, device_id, client_mutation_id, request_digest,
              previous_invoice_hash, invoice_hash, created_by, rev, created_at)
           SELECT s.id, s.branch_id, s.icv, s.number, nullif(s.customer, '')::uuid,
                  nullif(s.prescription, '')::uuid, nullif(s.coupon, '')::uuid,
                  CASE WHEN s.has_coupon THEN s.coupon_code END, s.method,
                  s.gross::numeric, s.discount::numeric, s.subtotal::numeric, s.vat::numeric,
                  s.total::numeric, nullif(s.session, '')::uuid, nullif(s.device, '')::uuid,
                  CASE WHEN s.has_cmid THEN s.cmid END, s.digest, s.previous, s.hash,
                  s.created_by, s.rev, s.created_at::timestamptz
           FROM unnest({ids}::uuid[], {branches}::uuid[], {icvs}::int8[], {numbers}::text[],
                       {customers}::text[], {prescriptions}::text[], {coupons}::text[],
                       {coupon_codes}::text[], {has_coupon}::bool[], {methods}::text[],
                       {gross}::text[], {discount}::text[], {subtotal}::text[], {vat}::text[],
                       {total}::text[], {sessions}::text[], {devices}::text[], {cmids}::text[],
                       {has_cmid}::bool[], {digests}::text[], {previous}::text[],
                       {hashes}::text[], {creators}::uuid[], {revs}::int8[],
                       {created}::text[])
             AS s(id, branch_id, icv, number, customer, prescription, coupon, coupon_code,
                  has_coupon, method, gross, discount, subtotal, vat, total, session, device,
                  cmid, has_cmid, digest, previous, hash, created_by, rev, created_at)"#
    );
    Stmt::raw(q.sql, q.values)
}

/// The lines of `sales` in one statement of constant text.
pub(super) fn items_stmt(sales: &[&Sale]) -> Stmt {
    let lines = || {
        sales
            .iter()
            .flat_map(|s| s.items.iter().map(move |i| (*s, i)))
    };
    let ids: Vec<Uuid> = lines().map(|(_, i)| i.id).collect();
    let sale_ids: Vec<Uuid> = lines().map(|(s, _)| s.id).collect();
    let numbers: Vec<i32> = sales
        .iter()
        .flat_map(|s| (0..s.items.len()).map(|n| n as i32))
        .collect();
    let medicines: Vec<Uuid> = lines().map(|(_, i)| i.medicine_id).collect();
    let batches: Vec<Uuid> = lines().map(|(_, i)| i.batch_id).collect();
    // Stored in base units: stock, reports and returns count them.
    let qtys: Vec<i32> = lines().map(|(_, i)| i.base_quantity).collect();
    let packs: Vec<String> = lines().map(|(_, i)| opt_text(i.pack_id)).collect();
    let units: Vec<i32> = lines().map(|(_, i)| i.pack_units).collect();
    let gtins: Vec<String> = lines().map(|(_, i)| opt_text(i.gtin.as_ref())).collect();
    let serials: Vec<String> = lines().map(|(_, i)| opt_text(i.serial.as_ref())).collect();
    let t = |f: &dyn Fn(&SaleItem) -> Decimal| {
        lines()
            .map(|(_, i)| f(i).to_string())
            .collect::<Vec<String>>()
    };
    let prices = t(&|i| i.unit_price);
    let discounts = t(&|i| i.discount);
    let totals = t(&|i| i.line_total);
    let rates = t(&|i| Decimal::from(i.vat_rate) / Decimal::ONE_HUNDRED);
    let vats = t(&|i| i.vat_amount);
    let costs = t(&|i| i.cost_at_sale);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO sale_items
             (id, sale_id, line_no, medicine_id, batch_id, quantity, unit_price, discount,
              line_total, vat_rate, vat_amount, cost_at_sale, pack_id, pack_units, gtin, serial)
           SELECT i.id, i.sale_id, i.line_no, i.medicine_id, i.batch_id, i.quantity,
                  i.price::numeric, i.discount::numeric, i.total::numeric, i.rate::numeric,
                  i.vat::numeric, i.cost::numeric, nullif(i.pack, '')::uuid, i.units,
                  nullif(i.gtin, ''), nullif(i.serial, '')
           FROM unnest({ids}::uuid[], {sale_ids}::uuid[], {numbers}::int4[], {medicines}::uuid[],
                       {batches}::uuid[], {qtys}::int4[], {prices}::text[], {discounts}::text[],
                       {totals}::text[], {rates}::text[], {vats}::text[], {costs}::text[],
                       {packs}::text[], {units}::int4[], {gtins}::text[], {serials}::text[])
             AS i(id, sale_id, line_no, medicine_id, batch_id, quantity, price, discount, total,
                  rate, vat, cost, pack, units, gtin, serial)"#
    );
    Stmt::raw(q.sql, q.values)
}

/// The serials a sale's lines dispense, each claimed once in the
/// organisation: a serial already claimed (and not released by a return)
/// is skipped, so the answer holds fewer rows than the sale has serials.
/// `None` when the sale has none.
pub(super) fn serials_stmt(sale: &Sale) -> Option<Stmt> {
    let lines: Vec<&SaleItem> = sale.items.iter().filter(|i| i.serial.is_some()).collect();
    if lines.is_empty() {
        return None;
    }
    let ids: Vec<Uuid> = lines.iter().map(|_| Uuid::now_v7()).collect();
    let items: Vec<Uuid> = lines.iter().map(|i| i.id).collect();
    let gtins: Vec<String> = lines.iter().map(|i| opt_text(i.gtin.as_ref())).collect();
    let serials: Vec<String> = lines.iter().map(|i| opt_text(i.serial.as_ref())).collect();
    let (sale_id, branch_id) = (sale.id, sale.branch_id);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO dispensed_serials (id, gtin, serial, sale_id, sale_item_id, branch_id)
           SELECT d.id, d.gtin, d.serial, {sale_id}, d.item, {branch_id}
           FROM unnest({ids}::uuid[], {gtins}::text[], {serials}::text[], {items}::uuid[])
             AS d(id, gtin, serial, item)
           ON CONFLICT (gtin, serial) WHERE released_at IS NULL DO NOTHING
           RETURNING id"#
    );
    Some(Stmt::raw(q.sql, q.values))
}

/// The `SALE` movements of a sale's pieces, as the stock ledger stores them.
pub(super) fn movements_of<'a>(
    sale: &'a Sale,
    pieces: &'a [Piece],
) -> impl Iterator<Item = (Movement, Uuid, Uuid)> + 'a {
    pieces.iter().map(move |p| {
        let m = Movement {
            batch_id: p.batch_id,
            delta: -p.quantity,
            kind: Kind::Sale,
            reference: Some(("sale", sale.id)),
            user_id: sale.created_by,
        };
        (m, p.medicine_id, sale.branch_id)
    })
}

/// The movements of sales and their pieces, in one statement.
pub(super) fn movements_stmt<'a>(sold: impl Iterator<Item = (&'a Sale, &'a [Piece])>) -> Stmt {
    let movements: Vec<(Movement, Uuid, Uuid)> = sold
        .flat_map(|(sale, pieces)| movements_of(sale, pieces))
        .collect();
    stock::movements_stmt(&movements)
}

/// What each takes from a batch: pieces of one batch summed, in the order
/// the batches were picked.
pub(super) fn per_batch<'a>(pieces: impl Iterator<Item = &'a Piece>) -> Vec<(Uuid, i32)> {
    let mut takes: Vec<(Uuid, i32)> = Vec::new();
    for p in pieces {
        match takes.iter_mut().find(|(b, _)| *b == p.batch_id) {
            Some((_, qty)) => *qty += p.quantity,
            None => takes.push((p.batch_id, p.quantity)),
        }
    }
    takes
}

/// What a price override's audit-log entry records: the price before and
/// the price given, with the line and the invoice.
fn override_images(s: &Sale, o: &Override) -> (serde_json::Value, serde_json::Value) {
    let before = serde_json::json!({
        "medicine_id": o.medicine_id,
        "unit_price": wire::two_places(o.selling_price),
    });
    let after = serde_json::json!({
        "medicine_id": o.medicine_id,
        "unit_price": wire::two_places(o.unit_price),
        "quantity": o.quantity,
        "branch_id": s.branch_id,
        "invoice_number": s.invoice_number,
    });
    (before, after)
}

/// The audit-log entries of the sales' price overrides, in one statement
/// (`None` when no sale has one).
pub(super) fn overrides_stmt<'a>(
    sold: impl Iterator<Item = (&'a Sale, &'a [Override])>,
) -> Option<Stmt> {
    let mut entries = Vec::new();
    for (sale, overrides) in sold {
        for o in overrides {
            let (before, after) = override_images(sale, o);
            entries.push((sale.created_by, sale.id, before, after, sale.branch_id));
        }
    }
    if entries.is_empty() {
        return None;
    }
    let ids: Vec<Uuid> = entries.iter().map(|_| Uuid::now_v7()).collect();
    let actors: Vec<Uuid> = entries.iter().map(|e| e.0).collect();
    let sales: Vec<String> = entries.iter().map(|e| e.1.to_string()).collect();
    let befores: Vec<String> = entries.iter().map(|e| e.2.to_string()).collect();
    let afters: Vec<String> = entries.iter().map(|e| e.3.to_string()).collect();
    let branches: Vec<Uuid> = entries.iter().map(|e| e.4).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO audit_log (id, actor_id, action, entity_type, entity_id, before, after, branch_id)
           SELECT a.id, a.actor, 'price_override', 'sale', a.sale, a.before::jsonb,
                  a.after::jsonb, a.branch
           FROM unnest({ids}::uuid[], {actors}::uuid[], {sales}::text[], {befores}::text[],
                       {afters}::text[], {branches}::uuid[])
             AS a(id, actor, sale, before, after, branch)"#
    );
    Some(Stmt::raw(q.sql, q.values))
}
