//! A return as a client sends it, its validation, the credit note as
//! answered, and the pure figures: each line's share of the refund and the
//! credit note's canonical text and hash.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::idempotency::{Key, RequestDigest, Scope};
use crate::input;
use crate::role::{Action, Role};
use crate::wire;

/// Most lines one return may carry.
pub const MAX_LINES: usize = 200;

/// A return as a client sends it (REST body of `POST /sales/{id}/returns`,
/// or a pushed `sale_return` payload without its `sale_id`).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct ReturnRequest {
    /// The sale lines taken back, each with a whole quantity above zero.
    pub items: Vec<ReturnLineRequest>,
    /// Why the customer brings it back. Required, not blank.
    pub reason: Option<String>,
    /// `cash`, `card`, `mobile_money` or `credit`; default the sale's
    /// payment method. `credit` lowers the customer's balance.
    pub refund_method: Option<String>,
    /// Whether the units go back onto the batch they were sold from
    /// (default true); false for opened or damaged goods.
    #[schema(value_type = Option<bool>)]
    pub restock: Option<input::Flag>,
    /// The client's id for this return; a retry with the same id has one effect.
    pub client_mutation_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct ReturnLineRequest {
    /// A line of the sale (`items[].id` of the sale).
    #[schema(value_type = String)]
    pub sale_item_id: Uuid,
    #[schema(value_type = f64, minimum = 1)]
    #[serde(deserialize_with = "input::json_number")]
    pub quantity: Decimal,
}

/// One line of a validated return.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ReturnLine {
    pub sale_item_id: Uuid,
    pub quantity: i32,
}

/// A validated return to file.
#[derive(Debug, Clone)]
pub struct NewReturn {
    pub sale_id: Uuid,
    /// The sale's branch: the return is made there, on its actor.
    pub branch_id: Uuid,
    pub user_id: Uuid,
    /// The caller's role: without `Action::IssueCreditNote` the return
    /// waits for an approval.
    pub role: Role,
    pub lines: Vec<ReturnLine>,
    pub reason: String,
    pub refund_method: Option<String>,
    pub restock: bool,
    pub client_mutation_id: Option<String>,
    pub device_id: Option<Uuid>,
}

impl ReturnRequest {
    /// Checks the shape of the request (400 naming the field); the sale,
    /// its lines and the quantities left are checked in the transaction.
    pub fn validate(
        self,
        sale_id: Uuid,
        branch_id: Uuid,
        user_id: Uuid,
        role: Role,
    ) -> Result<NewReturn> {
        if self.items.is_empty() {
            return Err(Error::validation(
                "items",
                "A return needs at least one item.",
            ));
        }
        if self.items.len() > MAX_LINES {
            return Err(Error::validation(
                "items",
                format!("A return may have at most {MAX_LINES} items."),
            ));
        }
        let mut lines: Vec<ReturnLine> = Vec::with_capacity(self.items.len());
        for (i, item) in self.items.iter().enumerate() {
            let quantity = input::quantity(&format!("items[{i}].quantity"), item.quantity)?;
            if lines.iter().any(|l| l.sale_item_id == item.sale_item_id) {
                return Err(Error::validation(
                    format!("items[{i}].sale_item_id"),
                    "This sale line is listed twice; give its whole quantity once.",
                ));
            }
            lines.push(ReturnLine {
                sale_item_id: item.sale_item_id,
                quantity,
            });
        }
        let reason = input::required_text(
            "reason",
            self.reason.as_deref().unwrap_or_default(),
            input::max::NOTES,
        )?;
        let refund_method = match self.refund_method.as_deref() {
            None => None,
            Some(m) => {
                let m = m.trim().to_lowercase();
                if !crate::sales::PAYMENT_METHODS.contains(&m.as_str()) {
                    return Err(Error::validation(
                        "refund_method",
                        "`refund_method` must be one of cash, card, mobile_money, credit.",
                    ));
                }
                Some(m)
            }
        };
        let client_mutation_id = self
            .client_mutation_id
            .map(|c| input::text("client_mutation_id", &c, input::max::MUTATION_ID))
            .transpose()?
            .filter(|c| !c.is_empty());
        Ok(NewReturn {
            sale_id,
            branch_id,
            user_id,
            role,
            lines,
            reason,
            refund_method,
            restock: self.restock.is_none_or(|f| f.0),
            client_mutation_id,
            device_id: None,
        })
    }
}

impl NewReturn {
    /// What tells a retry from a different return under the same mutation id.
    pub fn digest(&self) -> RequestDigest {
        RequestDigest::of_json(&serde_json::json!({
            "sale_id": self.sale_id,
            "lines": self.lines,
            "reason": self.reason,
            "refund_method": self.refund_method,
            "restock": self.restock,
        }))
    }

    /// The key its mutation id holds in `sale_returns`: the till's for a
    /// pushed return, else the branch's.
    pub fn key(&self) -> Option<Key<'_>> {
        Some(Key {
            table: "sale_returns",
            scope: match self.device_id {
                Some(device) => Scope::Device(device),
                None => Scope::Branch(self.branch_id),
            },
            client_mutation_id: self.client_mutation_id.as_deref()?,
        })
    }

    /// Whether the caller may issue the credit note at once (else it waits
    /// for an approval of kind `refund`).
    pub fn issues_at_once(&self) -> bool {
        Action::IssueCreditNote.permits(self.role)
    }
}

/// A return, and once issued its credit note. Money as decimal strings.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CreditNote {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub sale_id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// `<BRANCH CODE>-CN-<cn_seq, 8 digits>`; null until issued.
    pub credit_note_number: Option<String>,
    /// The branch's credit note counter: gapless, unique, increasing; null
    /// until issued.
    pub cn_seq: Option<i64>,
    pub original_invoice_number: String,
    pub original_icv: i64,
    #[schema(value_type = Option<String>)]
    pub customer_id: Option<Uuid>,
    pub items: Vec<CreditNoteItem>,
    /// `total - vat`.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub subtotal: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub vat: Decimal,
    /// What is refunded (VAT included).
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub total: Decimal,
    pub refund_method: String,
    pub restock: bool,
    pub reason: String,
    /// `pending_approval`, `issued` or `rejected`.
    pub status: String,
    /// The approval of kind `refund` a cashier's return waits for.
    #[schema(value_type = Option<String>)]
    pub approval_id: Option<Uuid>,
    /// The cash session that counted the refund, if one was open.
    #[schema(value_type = Option<String>)]
    pub cash_session_id: Option<Uuid>,
    #[schema(value_type = Option<String>)]
    pub device_id: Option<Uuid>,
    pub client_mutation_id: Option<String>,
    /// The hash of the branch's previous credit note (64 zeros for the first).
    pub previous_hash: Option<String>,
    pub credit_note_hash: Option<String>,
    /// Who filed the return.
    #[schema(value_type = String)]
    pub created_by: Uuid,
    pub created_by_name: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    /// Who issued the credit note: the filer, or the manager who approved it.
    #[schema(value_type = Option<String>)]
    pub issued_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub issued_at: Option<DateTime<Utc>>,
    /// When the approval was decided (approved or rejected).
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub decided_at: Option<DateTime<Utc>>,
    pub rev: i64,
    /// What the tax authority made of the credit note (`GET /returns/{id}`
    /// and the change feed's update once accepted; absent before it is
    /// issued and for credit notes older than the fiscal outbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fiscal: Option<crate::fiscal::read::FiscalStatus>,
}

/// One returned sale line: units of one batch of one medicine.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CreditNoteItem {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub sale_item_id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    /// Packs for a line sold by the pack, else base units.
    pub quantity: i32,
    /// Base units in one of what `quantity` counts (1 for loose units).
    pub pack_units: i32,
    /// Base units taken back: `quantity × pack_units`.
    pub base_quantity: i32,
    /// The sale line's unit price (per pack for a pack line).
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub unit_price: Decimal,
    /// VAT rate in whole percent, as the sale line had it.
    pub vat_rate: i32,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub vat_amount: Decimal,
    /// What this line refunds, VAT included.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub line_total: Decimal,
    /// Whether the units went back onto their batch.
    pub restocked: bool,
    /// The medicine is controlled (a register row is written on issue).
    #[serde(skip)]
    pub is_controlled: bool,
}

/// What filing a return answered: the return, and whether it was a replay
/// of an earlier request with the same mutation id.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub note: CreditNote,
    pub replayed: bool,
}

/// What a sale line has already given back: units held by issued and
/// pending returns, and the money those returns carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    pub units: i32,
    pub total: Decimal,
    pub vat: Decimal,
}

/// The share of a sale line's total and VAT that `now` more units carry,
/// after `held` were given back already, of `sold` units. The share is the
/// rounded proportion of the units returned so far less what earlier
/// returns carried, so the returns of a whole line add up to its total and
/// VAT exactly (never a cent more), whatever the order and splits.
pub fn refund_share(
    line_total: Decimal,
    vat: Decimal,
    sold: i32,
    held: Held,
    now: i32,
) -> (Decimal, Decimal) {
    if sold <= 0 {
        return (Decimal::ZERO, Decimal::ZERO);
    }
    let after = held.units + now;
    let part = |amount: Decimal| {
        if after >= sold {
            amount
        } else {
            wire::two_places(amount * Decimal::from(after) / Decimal::from(sold))
        }
    };
    let share = |amount: Decimal, given: Decimal| {
        let left = (amount - given).max(Decimal::ZERO);
        wire::two_places((part(amount) - given).clamp(Decimal::ZERO, left))
    };
    (share(line_total, held.total), share(vat, held.vat))
}

/// A rate (0.18) as whole percent (18), half away from zero.
pub fn percent(rate: Decimal) -> i32 {
    use rust_decimal::prelude::ToPrimitive;
    (rate * Decimal::ONE_HUNDRED)
        .round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
        .to_i32()
        .unwrap_or_default()
}

/// The text a credit note hash covers: every figure of the credit note and
/// its lines, the original invoice, then the previous credit note's hash.
pub fn canonical(n: &CreditNote, issued_at: DateTime<Utc>) -> String {
    let mut out = format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}\n",
        n.branch_id,
        n.cn_seq.unwrap_or_default(),
        n.credit_note_number.as_deref().unwrap_or_default(),
        issued_at.format("%Y-%m-%dT%H:%M:%S%.6fZ"),
        n.sale_id,
        n.original_invoice_number,
        n.refund_method,
        wire::two_places(n.subtotal),
        wire::two_places(n.vat),
        wire::two_places(n.total),
        n.previous_hash.as_deref().unwrap_or_default(),
    );
    for i in &n.items {
        out.push_str(&format!(
            "{}|{}|{}|{}|{}|{}|{}|{}\n",
            i.sale_item_id,
            i.medicine_id,
            i.batch_id,
            i.quantity,
            wire::two_places(i.unit_price),
            wire::two_places(i.line_total),
            wire::two_places(i.vat_amount),
            u8::from(i.restocked),
        ));
    }
    out
}

pub fn credit_note_hash(n: &CreditNote, issued_at: DateTime<Utc>) -> String {
    hex::encode(Sha256::digest(canonical(n, issued_at).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn held(units: i32, total: &str, vat: &str) -> Held {
        Held {
            units,
            total: d(total),
            vat: d(vat),
        }
    }

    fn shares(r: (Decimal, Decimal)) -> (String, String) {
        (r.0.to_string(), r.1.to_string())
    }

    #[test]
    fn a_whole_line_returned_at_once_refunds_exactly_what_it_cost() {
        let r = refund_share(d("1180.00"), d("180.00"), 2, Held::default(), 2);
        assert_eq!(shares(r), ("1180.00".into(), "180.00".into()));
    }

    #[test]
    fn returns_of_a_line_in_parts_add_up_to_its_total_and_vat() {
        // 10.00 over 3 units: 3.33, then 3.34 (6.67 - 3.33), then 3.33.
        let (t, v) = (d("10.00"), d("1.53"));
        let a = refund_share(t, v, 3, Held::default(), 1);
        assert_eq!(shares(a), ("3.33".into(), "0.51".into()));
        let b = refund_share(t, v, 3, held(1, "3.33", "0.51"), 1);
        assert_eq!(shares(b), ("3.34".into(), "0.51".into()));
        let c = refund_share(t, v, 3, held(2, "6.67", "1.02"), 1);
        assert_eq!(shares(c), ("3.33".into(), "0.51".into()));
        assert_eq!(a.0 + b.0 + c.0, t);
        assert_eq!(a.1 + b.1 + c.1, v);
    }

    #[test]
    fn after_a_rejected_return_the_rest_still_adds_up() {
        // The 3.34 of the second unit stays; the first unit's return was
        // rejected. Two more returns of one unit each take what is left.
        let (t, v) = (d("10.00"), d("0"));
        let b = held(1, "3.34", "0");
        let c = refund_share(t, v, 3, b, 1);
        assert_eq!(c.0.to_string(), "3.33");
        let d2 = refund_share(t, v, 3, held(2, "6.67", "0"), 1);
        assert_eq!(d2.0.to_string(), "3.33");
        assert_eq!(b.total + c.0 + d2.0, t);
    }

    #[test]
    fn a_share_is_never_negative_nor_more_than_is_left() {
        let r = refund_share(d("0.01"), d("0"), 3, Held::default(), 1);
        assert_eq!(r.0.to_string(), "0.00");
        let r = refund_share(d("5.00"), d("0"), 2, held(1, "5.00", "0"), 1);
        assert_eq!(r.0.to_string(), "0.00");
        assert_eq!(
            refund_share(d("5.00"), d("1"), 0, Held::default(), 1),
            (Decimal::ZERO, Decimal::ZERO)
        );
    }

    fn id(s: &str) -> Uuid {
        Uuid::parse_str(s).unwrap()
    }

    fn fixed_note() -> CreditNote {
        CreditNote {
            id: id("01958a3c-0000-7000-8000-0000000000c0"),
            sale_id: id("01958a3c-0000-7000-8000-000000000001"),
            branch_id: id("01958a3c-0000-7000-8000-0000000000b1"),
            credit_note_number: Some("KLA-CN-00000007".to_owned()),
            cn_seq: Some(7),
            original_invoice_number: "KLA-00000042".to_owned(),
            original_icv: 42,
            customer_id: None,
            items: vec![CreditNoteItem {
                id: Uuid::nil(),
                sale_item_id: id("01958a3c-0000-7000-8000-0000000000d1"),
                medicine_id: id("01958a3c-0000-7000-8000-00000000000a"),
                medicine_name: String::new(),
                batch_id: id("01958a3c-0000-7000-8000-0000000000ba"),
                quantity: 2,
                pack_units: 1,
                base_quantity: 2,
                unit_price: d("590"),
                vat_rate: 18,
                vat_amount: d("180"),
                line_total: d("1180"),
                restocked: true,
                is_controlled: false,
            }],
            subtotal: d("1000"),
            vat: d("180"),
            total: d("1180"),
            refund_method: "cash".to_owned(),
            restock: true,
            reason: "wrong strength".to_owned(),
            status: "issued".to_owned(),
            approval_id: None,
            cash_session_id: None,
            device_id: None,
            client_mutation_id: None,
            previous_hash: Some("0".repeat(64)),
            credit_note_hash: None,
            created_by: Uuid::nil(),
            created_by_name: String::new(),
            created_at: "2026-03-14T09:26:53.589793Z".parse().unwrap(),
            issued_by: None,
            issued_at: None,
            decided_at: None,
            rev: 0,
            fiscal: None,
        }
    }

    /// The credit note hash's canonical text and digest, pinned: a change
    /// breaks every chain already stored, so it must fail here first.
    #[test]
    fn the_credit_note_hash_covers_a_fixed_canonical_text() {
        let note = fixed_note();
        let at = note.created_at;
        assert_eq!(
            canonical(&note, at),
            format!(
                "01958a3c-0000-7000-8000-0000000000b1|7|KLA-CN-00000007|2026-03-14T09:26:53.589793Z\
                 |01958a3c-0000-7000-8000-000000000001|KLA-00000042|cash|1000.00|180.00|1180.00|{}\n\
                 01958a3c-0000-7000-8000-0000000000d1|01958a3c-0000-7000-8000-00000000000a\
                 |01958a3c-0000-7000-8000-0000000000ba|2|590.00|1180.00|180.00|1\n",
                "0".repeat(64)
            )
        );
        let pinned = credit_note_hash(&note, at);
        assert_eq!(pinned.len(), 64);
        type Edit = (&'static str, fn(&mut CreditNote));
        let edits: [Edit; 5] = [
            ("cn_seq", |n| n.cn_seq = Some(8)),
            ("total", |n| n.total += d("0.01")),
            ("refund method", |n| n.refund_method = "credit".to_owned()),
            ("a line's quantity", |n| n.items[0].quantity = 1),
            ("restocked", |n| n.items[0].restocked = false),
        ];
        for (what, edit) in edits {
            let mut n = fixed_note();
            edit(&mut n);
            assert_ne!(credit_note_hash(&n, at), pinned, "{what}");
        }
        let later = at + chrono::Duration::microseconds(1);
        assert_ne!(credit_note_hash(&note, later), pinned);
    }
}
