//! Sales: the one code path for `POST /sales` and a pushed `sale`/`create`.
//!
//! One transaction per sale: stock leaves the sellable batches first-expiry-
//! first-out (locked `FOR UPDATE`, never below zero), a coupon use is
//! counted, a credit customer's balance rises within the limit, the branch's
//! invoice counter row is bumped (so `icv` is gapless: a rolled-back sale
//! rolls its number back too; `UNIQUE (branch_id, icv)` backs it), the open
//! cash session's totals grow, and the sale is chained to the previous
//! invoice of its branch by hash.
//!
//! A sale naming a prescription locks it (`FOR UPDATE`, before the
//! batches), sells only what it lists and what is left of each line, adds
//! what it gives out to the lines and, when every line is filled, moves the
//! prescription to `DISPENSED` with itself as the sale. A prescription-only
//! or controlled medicine (whatever its prescription flag) sells only
//! against a prescription, and its register row names the prescription's
//! patient and prescriber. A price below the selling price needs a role
//! the policy lets override prices (`Action::OverridePrice`) and leaves an
//! audit-log entry. Every such refusal happens in `prepare`, before the
//! first write.
//!
//! Where things are: `request` (what a till or the API sends, validated),
//! `scanned` (a line's scanned code read: medicine, pack, batch, serial),
//! `plan` (reads and locks, FEFO and whole-pack picks, prices, VAT,
//! coupons, every refusal), `prescription` (what may be dispensed and what
//! was), `store` (the one writer of sale rows), `group` (the set-based
//! run), `write`
//! (the pipelined statements of a planned sale), `read` (sales back),
//! `chain` (the invoice hash chain), `model` (the sale as answered), and
//! here the branch actor's command.

use deadpool_postgres::GenericClient;

use crate::db::{Pool, Tx};
use crate::error::{Error, Result};
use crate::idempotency;
use crate::users::sessions;
use actors::runtime::Command;

mod chain;
pub mod desk;
mod group;
mod model;
mod plan;
mod prescription;
mod read;
mod request;
mod scanned;
mod store;
mod write;

pub use chain::{canonical, invoice_hash, verify_chain, ChainReport, GENESIS_HASH};
pub use model::{Sale, SaleItem};
pub use plan::standard_rate;
pub use read::{by_invoice_number, get, get_shown, list, ListFilter};
pub use request::{
    Line, NewSale, SaleLineRequest, SaleRequest, MAX_LINES, MAX_SCAN, PAYMENT_METHODS,
};
pub use write::{create, create_shared, ensure_counter};

/// What a create answered: the sale, and whether it was a replay of an
/// earlier request with the same mutation id.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub sale: Sale,
    pub replayed: bool,
}

/// `POST /sales` through the branch actor.
pub struct CreateSale(pub NewSale);

impl Command for CreateSale {
    type Error = crate::Error;
    type Output = Outcome;
    const NAME: &'static str = "create_sale";

    async fn run(self, pool: Pool) -> Result<Outcome> {
        let client = pool.get().await?;
        let sale = self.0;
        // BEGIN, the caller check and the retry lookup: one round trip. A
        // refusal or a replay drops the transaction (nothing was written).
        let tx = Tx::begin(&client);
        let (checked, done) = futures_util::join!(
            sessions::check_signers(&*tx, std::slice::from_ref(&sale.signer)),
            replay(&*tx, &sale)
        );
        checked?.into_iter().try_for_each(|c| c)?;
        if let Some(done) = done? {
            return Ok(done);
        }
        let attempt = match create(&*tx, &sale).await {
            Ok(created) => {
                tx.commit().await?;
                Ok(Outcome {
                    sale: created,
                    replayed: false,
                })
            }
            Err(e) => {
                drop(tx);
                Err(e)
            }
        };
        // Another process stored the same mutation id first: its sale.
        let keyed = sale.client_mutation_id.is_some();
        idempotency::replay_after_race(attempt, keyed, "sale", || replay(&client, &sale)).await
    }
}

/// Makes `sales` in order inside `tx`: each run of consecutive plain sales
/// through the set-based group writer (`group`), any other sale on its own
/// (it may lock a prescription or still be refused while writing; see
/// `create_shared`). Both store through `store`, the one writer of sale
/// rows. The outer error is a fault: the caller drops `tx` and makes the
/// sales one at a time.
pub(crate) async fn make_all(tx: &mut Tx<'_>, sales: &[&NewSale]) -> Result<Vec<Result<Sale>>> {
    let mut made = Vec::with_capacity(sales.len());
    let mut rest = sales;
    while let Some(first) = rest.first() {
        let plain = rest.iter().take_while(|s| group::is_plain(s)).count();
        if plain > 0 {
            let (run, after) = rest.split_at(plain);
            made.extend(group::make_run(&**tx, run).await?);
            rest = after;
        } else {
            made.push(create_shared(tx, first).await?);
            rest = rest.get(1..).unwrap_or_default();
        }
    }
    Ok(made)
}

/// The earlier sale with this branch's mutation id, when there is one.
pub(crate) async fn replay<C: GenericClient + Sync>(
    c: &C,
    sale: &NewSale,
) -> Result<Option<Outcome>> {
    let found = idempotency::lookup(c, sale.key(), &sale.digest(), &["id"]).await?;
    let Some(row) = found.or_refuse("sale")? else {
        return Ok(None);
    };
    let existing = get(c, row.get("id"))
        .await?
        .ok_or_else(|| Error::internal("replayed sale vanished"))?;
    Ok(Some(Outcome {
        sale: existing,
        replayed: true,
    }))
}

#[cfg(test)]
mod tests {
    use rust_decimal::Decimal;
    use uuid::Uuid;

    use super::chain::{canonical, invoice_hash};
    use super::model::{Sale, SaleItem};
    use super::plan::{percent, totals, vat_included, Totals};
    use super::prescription::{allocate, RxLine, Uncovered};

    fn line(medicine: Uuid, quantity: i32, dispensed: i32) -> RxLine {
        RxLine {
            id: Uuid::now_v7(),
            medicine_id: medicine,
            quantity,
            dispensed,
        }
    }

    #[test]
    fn allocate_takes_what_is_left_line_by_line() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let rx = vec![line(a, 3, 1), line(b, 2, 0), line(a, 4, 0)];
        // 2 left on the first line of `a`, then 4 on the second.
        let given = allocate(&rx, &[(a, 3), (b, 2), (a, 2)]).unwrap();
        assert_eq!(given, vec![(rx[0].id, 2), (rx[1].id, 2), (rx[2].id, 3)]);
    }

    #[test]
    fn allocate_names_the_first_line_not_covered() {
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let rx = vec![line(a, 3, 1), line(b, 2, 2)];
        assert_eq!(
            allocate(&rx, &[(a, 1), (a, 2)]),
            Err(Uncovered {
                line: 1,
                on_prescription: true,
                allowed: 1
            })
        );
        assert_eq!(
            allocate(&rx, &[(b, 1)]),
            Err(Uncovered {
                line: 0,
                on_prescription: true,
                allowed: 0
            })
        );
        assert_eq!(
            allocate(&rx, &[(a, 1), (c, 1)]),
            Err(Uncovered {
                line: 1,
                on_prescription: false,
                allowed: 0
            })
        );
        assert_eq!(allocate(&rx, &[(a, 2)]), Ok(vec![(rx[0].id, 2)]));
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn id(s: &str) -> Uuid {
        Uuid::parse_str(s).unwrap()
    }

    fn item(line_total: &str, vat_amount: &str, discount: &str) -> SaleItem {
        SaleItem {
            id: Uuid::nil(),
            medicine_id: Uuid::nil(),
            medicine_name: String::new(),
            batch_id: Uuid::nil(),
            quantity: 1,
            pack_id: None,
            pack_units: 1,
            base_quantity: 1,
            serial: None,
            gtin: None,
            unit_price: d(line_total) + d(discount),
            discount: d(discount),
            line_total: d(line_total),
            vat_rate: 18,
            vat_amount: d(vat_amount),
            cost_at_sale: Decimal::ZERO,
        }
    }

    #[test]
    fn vat_is_split_out_of_the_vat_inclusive_amount() {
        let standard = d("0.18");
        assert_eq!(vat_included(d("1180.00"), standard).to_string(), "180.00");
        assert_eq!(vat_included(d("115.00"), d("0.15")).to_string(), "15.00");
        assert_eq!(vat_included(d("99.99"), Decimal::ZERO).to_string(), "0.00");
        // 27 × 0.18 / 1.18 = 4.1186…
        assert_eq!(vat_included(d("27.00"), standard).to_string(), "4.12");
        // 0.125 × 0.25 / 1.25 = 0.025 exactly: half up, not to even.
        assert_eq!(vat_included(d("0.125"), d("0.25")).to_string(), "0.03");
    }

    #[test]
    fn a_sales_vat_is_the_sum_of_its_lines_each_rounded() {
        // Three lines of 0.10 at 18 %: 0.0153 each, 0.02 once rounded; the
        // sale carries 0.06, not the 0.05 that rounding the sum would give.
        let line = vat_included(d("0.10"), d("0.18"));
        assert_eq!(line.to_string(), "0.02");
        assert_eq!(vat_included(d("0.30"), d("0.18")).to_string(), "0.05");
        let t = totals(&[
            item("0.10", "0.02", "0"),
            item("0.10", "0.02", "0"),
            item("0.10", "0.02", "0"),
        ]);
        assert_eq!(
            (
                t.total.to_string(),
                t.vat.to_string(),
                t.subtotal.to_string()
            ),
            ("0.30".to_owned(), "0.06".to_owned(), "0.24".to_owned())
        );
    }

    #[test]
    fn totals_add_the_lines_and_subtotal_is_total_minus_vat() {
        let t = totals(&[item("27.00", "4.12", "3.00"), item("5.5", "0", "0")]);
        assert_eq!(
            t,
            Totals {
                discount: d("3.00"),
                subtotal: d("28.38"),
                vat: d("4.12"),
                total: d("32.50"),
            }
        );
        // Two places on the wire, whatever the scale of the inputs.
        assert_eq!(t.total.to_string(), "32.50");
        assert_eq!(t.discount.to_string(), "3.00");
        assert_eq!(totals(&[]).total.to_string(), "0.00");
    }

    #[test]
    fn rates_are_stored_as_whole_percent() {
        assert_eq!(percent(d("0.18")), 18);
        assert_eq!(percent(d("0.15")), 15);
        assert_eq!(percent(Decimal::ZERO), 0);
        assert_eq!(percent(d("0.175")), 18);
        assert_eq!(percent(d("0.125")), 13);
    }

    /// A sale as `write` makes it, with fixed ids and figures.
    fn fixed_sale() -> Sale {
        let mut a = item("27.00", "4.12", "3.00");
        a.medicine_id = id("01958a3c-0000-7000-8000-00000000000a");
        a.batch_id = id("01958a3c-0000-7000-8000-0000000000ba");
        a.quantity = 3;
        a.unit_price = d("10");
        let mut b = item("5.50", "0.00", "0");
        b.medicine_id = id("01958a3c-0000-7000-8000-00000000000b");
        b.batch_id = id("01958a3c-0000-7000-8000-0000000000bb");
        b.vat_rate = 0;
        Sale {
            id: id("01958a3c-0000-7000-8000-000000000001"),
            branch_id: id("01958a3c-0000-7000-8000-0000000000b1"),
            icv: 42,
            invoice_number: "KLA-00000042".to_owned(),
            customer_id: Some(id("01958a3c-0000-7000-8000-0000000000c1")),
            prescription_id: None,
            coupon_code: Some("SAVE3".to_owned()),
            payment_method: "cash".to_owned(),
            discount: d("3.00"),
            subtotal: d("28.38"),
            vat: d("4.12"),
            total: d("32.5"),
            cash_session_id: None,
            device_id: None,
            client_mutation_id: None,
            status: "completed".to_owned(),
            previous_invoice_hash:
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_owned(),
            invoice_hash: String::new(),
            created_by: Uuid::nil(),
            created_by_name: "Cashier".to_owned(),
            rev: 7,
            created_at: "2026-03-14T09:26:53.589793Z".parse().unwrap(),
            items: vec![a, b],
            fiscal: None,
        }
    }

    /// The invoice hash chain's canonical text and digest, pinned: a change
    /// of either breaks every chain already stored (and the tills' own
    /// recomputation), so it must fail here first. The digest is the plain
    /// SHA-256 (hex) of the text: `printf '%s' "$text" | sha256sum` gives
    /// the same. Figures print with two places whatever their scale (the
    /// total is held as 32.5, the first line's price as 10).
    #[test]
    fn the_invoice_hash_covers_a_fixed_canonical_text() {
        let sale = fixed_sale();
        let text = canonical(&sale, sale.created_at);
        assert_eq!(
            text,
            "01958a3c-0000-7000-8000-0000000000b1|42|KLA-00000042|2026-03-14T09:26:53.589793Z|cash\
             |01958a3c-0000-7000-8000-0000000000c1|3.00|28.38|4.12|32.50\
             |9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n\
             01958a3c-0000-7000-8000-00000000000a|01958a3c-0000-7000-8000-0000000000ba|3|10.00|3.00|27.00|4.12\n\
             01958a3c-0000-7000-8000-00000000000b|01958a3c-0000-7000-8000-0000000000bb|1|5.50|0.00|5.50|0.00\n"
        );
        assert_eq!(
            invoice_hash(&sale, sale.created_at),
            "2387bcda0cfe17477cdc093a720d6c9c9a28a7c5d7a019a430f966f03abffbe9"
        );
    }

    #[test]
    fn the_invoice_hash_changes_with_every_covered_figure() {
        let sale = fixed_sale();
        let pinned = invoice_hash(&sale, sale.created_at);
        type Edit = (&'static str, fn(&mut Sale));
        let edits: [Edit; 8] = [
            ("icv", |s| s.icv += 1),
            ("customer", |s| s.customer_id = None),
            ("total", |s| s.total += d("0.01")),
            ("previous hash", |s| {
                s.previous_invoice_hash = "0".repeat(64)
            }),
            ("a line's batch", |s| s.items[0].batch_id = Uuid::nil()),
            ("a line's vat", |s| s.items[1].vat_amount = d("0.01")),
            ("a line dropped", |s| {
                s.items.pop();
            }),
            ("the lines' order", |s| s.items.reverse()),
        ];
        for (what, edit) in edits {
            let mut s = fixed_sale();
            edit(&mut s);
            assert_ne!(invoice_hash(&s, s.created_at), pinned, "{what}");
        }
        // The time counts to the microsecond.
        let later = sale.created_at + chrono::Duration::microseconds(1);
        assert_ne!(invoice_hash(&sale, later), pinned);
    }
}
