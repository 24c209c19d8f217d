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

use std::collections::HashMap;

use chrono::{DateTime, SubsecRound, Utc};
use deadpool_postgres::{GenericClient, Transaction};
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Order, Query};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::changes::{self, Change, Op};
use crate::coupons::{self, Coupon};
use crate::customers;
use crate::db::{self, Pool, Stmt};
use crate::error::{Code, Error, Result};
use crate::input;
use crate::role::{Action, Role};
use crate::runtime::Command;
use crate::stock::{self, Kind, Movement};
use crate::wire;

pub const PAYMENT_METHODS: [&str; 4] = ["cash", "card", "mobile_money", "credit"];
/// Hash the first invoice of a branch chains to.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const MAX_LINES: usize = 200;

/// A sale as a client sends it (REST body or push payload).
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
pub struct SaleRequest {
    pub items: Vec<SaleLineRequest>,
    /// `cash`, `card`, `mobile_money` or `credit`.
    pub payment_method: String,
    #[schema(value_type = Option<String>)]
    pub customer_id: Option<Uuid>,
    /// A pending prescription of the branch. Required when a line is
    /// prescription-only or controlled; the sale may then sell only the
    /// medicines it lists, each up to what is left of it.
    #[schema(value_type = Option<String>)]
    pub prescription_id: Option<Uuid>,
    pub coupon_code: Option<String>,
    /// The client's id for this sale; a retry with the same id has one effect.
    pub client_mutation_id: Option<String>,
    /// Admins only: sell on another branch.
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
}

#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
pub struct SaleLineRequest {
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    #[schema(value_type = f64, minimum = 1)]
    pub quantity: Decimal,
    /// Defaults to the medicine's selling price; never above `max_public_price`.
    /// Below the selling price (a price override) only for an admin, branch
    /// manager or pharmacist (403 otherwise), and written to the audit log.
    #[schema(value_type = Option<f64>)]
    pub unit_price: Option<Decimal>,
}

/// A validated sale to make.
#[derive(Debug, Clone)]
pub struct NewSale {
    pub branch_id: Uuid,
    pub user_id: Uuid,
    /// The seller's role: a price below the selling price needs
    /// `Action::OverridePrice`.
    pub role: Role,
    pub lines: Vec<Line>,
    pub payment_method: String,
    pub customer_id: Option<Uuid>,
    pub prescription_id: Option<Uuid>,
    pub coupon_code: Option<String>,
    pub device_id: Option<Uuid>,
    pub client_mutation_id: Option<String>,
    /// When the sale happened, if not now (a till that sold offline; demo data).
    pub occurred_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub medicine_id: Uuid,
    pub quantity: i32,
    pub unit_price: Option<Decimal>,
}

impl SaleRequest {
    /// Checks the shape of the request; stock, prices and people are checked
    /// in the transaction.
    pub fn validate(self, branch_id: Uuid, user_id: Uuid, role: Role) -> Result<NewSale> {
        if self.items.is_empty() {
            return Err(Error::validation(
                "items",
                "A sale needs at least one item.",
            ));
        }
        if self.items.len() > MAX_LINES {
            return Err(Error::validation(
                "items",
                format!("A sale may have at most {MAX_LINES} items."),
            ));
        }
        let mut lines = Vec::with_capacity(self.items.len());
        for (i, item) in self.items.into_iter().enumerate() {
            let quantity = input::quantity(&format!("items[{i}].quantity"), item.quantity)?;
            let unit_price = item
                .unit_price
                .map(|p| input::amount(&format!("items[{i}].unit_price"), p))
                .transpose()?;
            lines.push(Line {
                medicine_id: item.medicine_id,
                quantity,
                unit_price,
            });
        }
        let method = self.payment_method.trim().to_lowercase();
        if !PAYMENT_METHODS.contains(&method.as_str()) {
            return Err(Error::validation(
                "payment_method",
                "`payment_method` must be one of cash, card, mobile_money, credit.",
            ));
        }
        if method == "credit" && self.customer_id.is_none() {
            return Err(Error::validation(
                "customer_id",
                "A credit sale needs a `customer_id`.",
            ));
        }
        let coupon_code = self
            .coupon_code
            .map(|c| input::text("coupon_code", &c, input::max::COUPON_CODE))
            .transpose()?
            .map(|c| c.to_uppercase())
            .filter(|c| !c.is_empty());
        let client_mutation_id = self
            .client_mutation_id
            .map(|c| input::text("client_mutation_id", &c, 200))
            .transpose()?
            .filter(|c| !c.is_empty());
        Ok(NewSale {
            branch_id,
            user_id,
            role,
            lines,
            payment_method: method,
            customer_id: self.customer_id,
            prescription_id: self.prescription_id,
            coupon_code,
            device_id: None,
            client_mutation_id,
            occurred_at: None,
        })
    }
}

impl NewSale {
    /// Digest of what the client asked for, to tell a retry from a different
    /// sale reusing a mutation id.
    pub fn digest(&self) -> String {
        let canonical = serde_json::json!({
            "lines": self.lines,
            "payment_method": self.payment_method,
            "customer_id": self.customer_id,
            "prescription_id": self.prescription_id,
            "coupon_code": self.coupon_code,
        });
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }
}

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
    pub quantity: i32,
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

/// The text an invoice hash covers: every figure of the sale and its lines,
/// then the previous invoice's hash.
pub fn canonical(s: &Sale, created_at: DateTime<Utc>) -> String {
    let opt = |u: Option<Uuid>| u.map(|u| u.to_string()).unwrap_or_default();
    let mut out = format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}\n",
        s.branch_id,
        s.icv,
        s.invoice_number,
        created_at.format("%Y-%m-%dT%H:%M:%S%.6fZ"),
        s.payment_method,
        opt(s.customer_id),
        wire::two_places(s.discount),
        wire::two_places(s.subtotal),
        wire::two_places(s.vat),
        wire::two_places(s.total),
        s.previous_invoice_hash,
    );
    for i in &s.items {
        out.push_str(&format!(
            "{}|{}|{}|{}|{}|{}|{}\n",
            i.medicine_id,
            i.batch_id,
            i.quantity,
            wire::two_places(i.unit_price),
            wire::two_places(i.discount),
            wire::two_places(i.line_total),
            wire::two_places(i.vat_amount),
        ));
    }
    out
}

pub fn invoice_hash(s: &Sale, created_at: DateTime<Utc>) -> String {
    hex::encode(Sha256::digest(canonical(s, created_at).as_bytes()))
}

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
    type Output = Outcome;
    const NAME: &'static str = "create_sale";

    async fn run(self, pool: Pool) -> Result<Outcome> {
        let mut client = pool.get().await?;
        let sale = self.0;
        if let Some(done) = replay(&client, &sale).await? {
            return Ok(done);
        }
        let tx = client.transaction().await?;
        match create(&tx, &sale).await {
            Ok(created) => {
                tx.commit().await?;
                Ok(Outcome {
                    sale: created,
                    replayed: false,
                })
            }
            // Another process stored the same mutation id first.
            Err(Error::Conflict(_)) if sale.client_mutation_id.is_some() => {
                drop(tx);
                replay(&client, &sale)
                    .await?
                    .ok_or_else(|| Error::busy("The sale conflicted with another; please retry."))
            }
            Err(e) => Err(e),
        }
    }
}

/// The earlier sale with this branch's mutation id, when there is one.
pub(crate) async fn replay<C: GenericClient + Sync>(
    c: &C,
    sale: &NewSale,
) -> Result<Option<Outcome>> {
    let Some(cmid) = sale.client_mutation_id.as_deref() else {
        return Ok(None);
    };
    if sale.device_id.is_some() {
        return Ok(None);
    }
    let q = Query::select()
        .columns(["id", "request_digest"])
        .from("sales")
        .and_where(Expr::col("branch_id").eq(sale.branch_id))
        .and_where(Expr::col("client_mutation_id").eq(cmid))
        .and_where(Expr::col("device_id").is_null())
        .to_owned();
    let Some(row) = db::fetch_opt(c, &q).await? else {
        return Ok(None);
    };
    let digest: Option<String> = row.get("request_digest");
    if digest.as_deref() != Some(sale.digest().as_str()) {
        return Err(Error::conflict(
            "This client_mutation_id was already used for a different sale.",
        ));
    }
    let existing = get(c, row.get("id"))
        .await?
        .ok_or_else(|| Error::internal("replayed sale vanished"))?;
    Ok(Some(Outcome {
        sale: existing,
        replayed: true,
    }))
}

/// A medicine as a sale needs it.
struct Product {
    name: String,
    selling_price: Decimal,
    max_public_price: Decimal,
    vat_category: String,
    requires_prescription: bool,
    is_controlled: bool,
    category: Option<String>,
}

async fn products<C: GenericClient + Sync>(c: &C, ids: &[Uuid]) -> Result<HashMap<Uuid, Product>> {
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

/// One line of the prescription a sale names, as locked.
#[derive(Debug, Clone)]
struct RxLine {
    id: Uuid,
    medicine_id: Uuid,
    quantity: i32,
    dispensed: i32,
}

/// The pending prescription a sale names, locked `FOR UPDATE`.
struct Rx {
    id: Uuid,
    rx_number: String,
    patient_id: String,
    licence: String,
    lines: Vec<RxLine>,
}

/// Locks the pending prescription of the branch a sale names and reads its
/// lines. Sales against one prescription queue on its row (two server
/// processes too), and the lines are read by a statement that starts once
/// the lock is held, so each sale sees what the previous ones dispensed.
async fn prescription<C: GenericClient + Sync>(tx: &C, id: Uuid, branch_id: Uuid) -> Result<Rx> {
    let lock = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT rx_number, patient_id_number, prescriber_license FROM prescriptions
           WHERE id = {id} AND branch_id = {branch_id} AND status = 'PENDING' AND NOT is_deleted
           FOR UPDATE"#
    );
    let lines = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, medicine_id, quantity, dispensed_quantity FROM prescription_items
           WHERE prescription_id = {id} ORDER BY line_no, id"#
    );
    let answers = db::pipeline(
        tx,
        &[
            Stmt::raw(lock.sql, lock.values),
            Stmt::raw(lines.sql, lines.values),
        ],
    )
    .await?;
    let [head, lines]: [Vec<Row>; 2] = answers
        .try_into()
        .map_err(|_| Error::internal("the prescription read answered short"))?;
    let head = head.first().ok_or_else(|| {
        Error::validation(
            "prescription_id",
            "`prescription_id` must name a pending prescription of this branch.",
        )
    })?;
    Ok(Rx {
        id,
        rx_number: head.get(0),
        patient_id: head.get(1),
        licence: head.get(2),
        lines: lines
            .iter()
            .map(|r| RxLine {
                id: r.get(0),
                medicine_id: r.get(1),
                quantity: r.get(2),
                dispensed: r.get(3),
            })
            .collect(),
    })
}

/// A sale line the prescription does not cover: its index and how many
/// units of its medicine the prescription still allows (0 when the
/// medicine is not on it at all).
#[derive(Debug, PartialEq, Eq)]
struct Uncovered {
    line: usize,
    on_prescription: bool,
    allowed: i32,
}

/// Takes the sale's lines `(medicine, quantity)` from the prescription's
/// lines, in their order, each within what is left of it. Answers what
/// each prescription line gives out `(line id, units)`, or the first sale
/// line the prescription does not cover.
fn allocate(
    rx: &[RxLine],
    sale: &[(Uuid, i32)],
) -> std::result::Result<Vec<(Uuid, i32)>, Uncovered> {
    let mut left: Vec<i32> = rx.iter().map(|l| l.quantity - l.dispensed).collect();
    let mut given = vec![0i32; rx.len()];
    for (i, &(medicine, quantity)) in sale.iter().enumerate() {
        let on_prescription = rx.iter().any(|l| l.medicine_id == medicine);
        let allowed: i32 = rx
            .iter()
            .zip(&left)
            .filter(|(l, _)| l.medicine_id == medicine)
            .map(|(_, n)| Ord::max(*n, 0))
            .sum();
        if !on_prescription || quantity > allowed {
            return Err(Uncovered {
                line: i,
                on_prescription,
                allowed,
            });
        }
        let mut wanted = quantity;
        for (k, l) in rx.iter().enumerate() {
            if wanted == 0 {
                break;
            }
            if l.medicine_id != medicine || left[k] <= 0 {
                continue;
            }
            let take = Ord::min(wanted, left[k]);
            left[k] -= take;
            given[k] += take;
            wanted -= take;
        }
    }
    Ok(rx
        .iter()
        .zip(given)
        .filter(|(_, n)| *n > 0)
        .map(|(l, n)| (l.id, n))
        .collect())
}

/// What a sale gives out against its prescription.
struct Dispense {
    rx_id: Uuid,
    patient_id: String,
    licence: String,
    /// Units per prescription line.
    adds: Vec<(Uuid, i32)>,
    /// After this sale every line is fully dispensed.
    completes: bool,
}

impl Dispense {
    /// Checks the sale against the locked prescription: 400 naming the
    /// first line whose medicine is not on it or exceeds what is left.
    fn check(rx: Rx, sale: &NewSale, catalogue: &HashMap<Uuid, Product>) -> Result<Dispense> {
        let wanted: Vec<(Uuid, i32)> = sale
            .lines
            .iter()
            .map(|l| (l.medicine_id, l.quantity))
            .collect();
        let adds = allocate(&rx.lines, &wanted).map_err(|u| {
            let line = &sale.lines[u.line];
            let name = catalogue
                .get(&line.medicine_id)
                .map(|p| p.name.as_str())
                .unwrap_or_default();
            if u.on_prescription {
                Error::rule(
                    Code::PrescriptionExceeded,
                    format!("items[{}].quantity", u.line),
                    format!(
                        "Prescription {} allows {} more of {}; {} requested.",
                        rx.rx_number, u.allowed, name, line.quantity
                    ),
                )
            } else {
                Error::rule(
                    Code::PrescriptionRequired,
                    format!("items[{}].medicine_id", u.line),
                    format!(
                        "{} is not on prescription {}: 0 may be sold against it.",
                        name, rx.rx_number
                    ),
                )
            }
        })?;
        let completes = rx.lines.iter().all(|l| {
            let added: i32 = adds
                .iter()
                .filter(|(id, _)| *id == l.id)
                .map(|(_, n)| n)
                .sum();
            l.dispensed + added >= l.quantity
        });
        Ok(Dispense {
            rx_id: rx.id,
            patient_id: rx.patient_id,
            licence: rx.licence,
            adds,
            completes,
        })
    }

    /// The line updates (each answers a row only if it stays within the
    /// prescribed quantity), then the prescription row: its dispensed
    /// units, and when complete its move to `DISPENSED` with the sale.
    fn stmts(&self, s: &Sale) -> Vec<Stmt> {
        let mut out: Vec<Stmt> = self
            .adds
            .iter()
            .map(|&(line, add)| {
                let rx_id = self.rx_id;
                let q = sea_query::raw_query!(
                    PostgresQueryBuilder,
                    r#"UPDATE prescription_items SET dispensed_quantity = dispensed_quantity + {add}
                       WHERE id = {line} AND prescription_id = {rx_id}
                         AND dispensed_quantity + {add} <= quantity
                       RETURNING id"#
                );
                Stmt::raw(q.sql, q.values)
            })
            .collect();
        let units: i32 = self.adds.iter().map(|(_, n)| n).sum();
        let mut q = Query::update()
            .table("prescriptions")
            .value("dispensed_units", Expr::col("dispensed_units").add(units))
            .value("updated_at", Utc::now())
            .and_where(Expr::col("id").eq(self.rx_id))
            .and_where(Expr::col("status").eq("PENDING"))
            .and_where(Expr::col("is_deleted").eq(false))
            .returning_col("id")
            .to_owned();
        if self.completes {
            q.value("status", "DISPENSED")
                .value("sale_id", s.id)
                .value("dispensed_by", s.created_by)
                .value("dispensed_at", s.created_at);
        }
        out.push(Stmt::of(&q));
        out
    }
}

/// A line sold below its medicine's selling price.
struct Override {
    medicine_id: Uuid,
    quantity: i32,
    selling_price: Decimal,
    unit_price: Decimal,
}

/// The audit-log entry of a price override.
fn override_stmt(s: &Sale, o: &Override) -> Stmt {
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
    let q = Query::insert()
        .into_table("audit_log")
        .columns([
            "id",
            "actor_id",
            "action",
            "entity_type",
            "entity_id",
            "before",
            "after",
            "branch_id",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            s.created_by.into(),
            "price_override".into(),
            "sale".into(),
            s.id.to_string().into(),
            before.into(),
            after.into(),
            s.branch_id.into(),
        ])
        .to_owned();
    Stmt::of(&q)
}

/// One priced piece of a sale: a line as taken from one batch.
struct Piece {
    medicine_id: Uuid,
    batch_id: Uuid,
    quantity: i32,
    unit_price: Decimal,
    cost: Decimal,
    rate: Decimal,
    gross: Decimal,
}

/// Makes the sale in `tx`. The caller commits.
pub async fn create<C: GenericClient + Sync>(tx: &C, sale: &NewSale) -> Result<Sale> {
    let plan = prepare(tx, sale).await?;
    write(tx, plan).await
}

/// `create` inside a transaction shared with other sales (a group commit, a
/// pushed run). The outer error is a fault: the shared transaction must be
/// dropped. The inner one is a refusal, and nothing of the sale was written.
///
/// Only a sale that may still be refused while it writes (a coupon used up
/// meanwhile, a credit limit) gets a savepoint. The others are refused, if
/// at all, before their first write, and skip it. A savepoint is a
/// subtransaction, and a row that one subtransaction updated and the next
/// locks gets a multixact, which concurrent writers then queue on.
pub async fn create_shared(tx: &mut Transaction<'_>, sale: &NewSale) -> Result<Result<Sale>> {
    let plan = match prepare(&*tx, sale).await {
        Ok(plan) => plan,
        Err(e) if e.is_refusal() => {
            // A refusal the database raised has aborted the transaction:
            // then the probe fails and the caller starts over.
            let probe = sea_query::raw_query!(PostgresQueryBuilder, "SELECT 1");
            db::run(&*tx, &Stmt::raw(probe.sql, probe.values)).await?;
            return Ok(Err(e));
        }
        Err(fault) => return Err(fault),
    };
    if !plan.may_refuse_while_writing() {
        // A refusal from here on (a branch closed meanwhile) is a fault.
        return write(&*tx, plan).await.map(Ok);
    }
    let sp = tx.savepoint("sale").await?;
    match write(&sp, plan).await {
        Ok(made) => {
            sp.commit().await?;
            Ok(Ok(made))
        }
        Err(e) if e.is_refusal() => {
            sp.rollback().await?;
            Ok(Err(e))
        }
        Err(fault) => Err(fault),
    }
}

/// A sale read, locked, priced and checked, ready to write.
struct Plan<'a> {
    sale: &'a NewSale,
    catalogue: HashMap<Uuid, Product>,
    pieces: Vec<Piece>,
    items: Vec<SaleItem>,
    coupon: Option<Coupon>,
    /// What the sale gives out against its prescription.
    dispense: Option<Dispense>,
    /// Lines sold below the selling price, for the audit log.
    overrides: Vec<Override>,
    seller_name: String,
    sale_id: Uuid,
    created_at: DateTime<Utc>,
    totals: Totals,
}

impl Plan<'_> {
    fn may_refuse_while_writing(&self) -> bool {
        self.coupon.is_some() || self.is_credit()
    }

    fn is_credit(&self) -> bool {
        self.sale.customer_id.is_some() && self.sale.payment_method == "credit"
    }
}

/// Reads, locks and checks everything a sale needs; writes nothing, so a
/// refusal here leaves the transaction as it found it.
async fn prepare<'a, C: GenericClient + Sync>(tx: &C, sale: &'a NewSale) -> Result<Plan<'a>> {
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
    for (i, line) in sale.lines.iter().enumerate() {
        if !catalogue.contains_key(&line.medicine_id) {
            return Err(Error::validation(
                format!("items[{i}].medicine_id"),
                "This medicine does not exist or is not active.",
            ));
        }
    }
    // A price below the selling price is an override: refused unless the
    // seller's role may make it (before any lock is waited for).
    let mut overrides = Vec::new();
    for line in &sale.lines {
        let product = &catalogue[&line.medicine_id];
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
    // A controlled medicine needs a prescription whatever its
    // `requires_prescription` flag says.
    let needs_rx = sale.lines.iter().find_map(|l| {
        let p = &catalogue[&l.medicine_id];
        match (p.is_controlled, p.requires_prescription) {
            (true, _) => Some(format!("{} is a controlled medicine", p.name)),
            (false, true) => Some(format!("{} is prescription-only", p.name)),
            _ => None,
        }
    });
    let dispense = match (sale.prescription_id, needs_rx) {
        (Some(id), _) => {
            let rx = prescription(tx, id, sale.branch_id).await?;
            Some(Dispense::check(rx, sale, &catalogue)?)
        }
        (None, Some(why)) => {
            return Err(Error::rule(
                Code::PrescriptionRequired,
                "prescription_id",
                format!(
                    "{why}: give the `prescription_id` of a pending prescription that lists it."
                ),
            ));
        }
        (None, None) => None,
    };
    let mut lots = match locked {
        Some(lots) => lots,
        None => stock::lock_sellable(tx, sale.branch_id, &ids).await?,
    };
    let mut pieces = Vec::new();
    for (i, line) in sale.lines.iter().enumerate() {
        let product = &catalogue[&line.medicine_id];
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
        let available = stock::available(&lots, line.medicine_id);
        let picks = stock::pick(&mut lots, line.medicine_id, line.quantity).ok_or_else(|| {
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
    let mut items = Vec::with_capacity(pieces.len());
    for (p, discount) in pieces.iter().zip(&discounts) {
        // The discount comes off the VAT-inclusive gross; the VAT is what
        // the rest (what is paid) contains.
        let line_total = p.gross - discount;
        let vat_amount = vat_included(line_total, p.rate);
        items.push(SaleItem {
            id: Uuid::now_v7(),
            medicine_id: p.medicine_id,
            medicine_name: catalogue[&p.medicine_id].name.clone(),
            batch_id: p.batch_id,
            quantity: p.quantity,
            unit_price: wire::two_places(p.unit_price),
            discount: wire::two_places(*discount),
            line_total: wire::two_places(line_total),
            vat_rate: percent(p.rate),
            vat_amount,
            cost_at_sale: wire::two_places(p.cost),
        });
    }
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

/// Writes a prepared sale: coupon and credit first (they may still refuse),
/// then stock, counter, session, the sale and its feed rows.
async fn write<C: GenericClient + Sync>(tx: &C, plan: Plan<'_>) -> Result<Sale> {
    let Plan {
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
    } = plan;
    if let Some(c) = &coupon {
        coupons::redeem(tx, c).await?;
    }
    if let (Some(id), true) = (sale.customer_id, sale.payment_method == "credit") {
        customers::charge(
            tx,
            id,
            totals.total,
            (sale_id, sale.branch_id),
            sale.user_id,
        )
        .await?;
    }

    // Every refusal (coupon used up, credit limit) has happened by now; the
    // batches were locked above, so taking the stock cannot fail. The rest
    // is two pipelined round trips: first the writes whose answers the sale
    // needs (the batches with their revs, the invoice number, the cash
    // session, the sale's rev), in lock order, then the rows that use them.
    let takes = per_batch(&pieces);
    let answers = db::pipeline(
        tx,
        &[
            stock::take_stmt(&takes),
            counter_stmt(sale.branch_id),
            session_stmt(sale, totals.total, totals.vat),
            changes::allocate_stmt(),
        ],
    )
    .await?;
    let [taken, counter, session, rev]: [Vec<Row>; 4] = answers
        .try_into()
        .map_err(|_| Error::internal("the sale's pipeline answered short"))?;
    if taken.len() != takes.len() {
        return Err(Error::rule(
            Code::InsufficientStock,
            "items",
            "Not enough stock left in the batch for this change.",
        ));
    }
    let counter = match counter.first() {
        Some(r) => Counter::from_row(r),
        None => bump_counter(tx, sale.branch_id).await?,
    };
    let cash_session_id: Option<Uuid> = session.first().map(|r| r.get(0));
    let rev: i64 = rev
        .first()
        .map(|r| r.get(0))
        .ok_or_else(|| Error::internal("nextval returned no row"))?;
    let mut made = Sale {
        id: sale_id,
        branch_id: sale.branch_id,
        icv: counter.icv,
        invoice_number: format!("{}-{:08}", counter.branch_code, counter.icv),
        customer_id: sale.customer_id,
        prescription_id: sale.prescription_id,
        coupon_code: coupon.as_ref().map(|c| c.code.clone()),
        payment_method: sale.payment_method.clone(),
        discount: totals.discount,
        subtotal: totals.subtotal,
        vat: totals.vat,
        total: totals.total,
        cash_session_id,
        device_id: sale.device_id,
        client_mutation_id: sale.client_mutation_id.clone(),
        status: "completed".to_owned(),
        previous_invoice_hash: counter.previous_hash,
        invoice_hash: String::new(),
        created_by: sale.user_id,
        created_by_name: seller_name,
        rev,
        created_at,
        items,
    };
    made.invoice_hash = invoice_hash(&made, created_at);
    // The register names the prescription's patient and prescriber.
    let (patient, licence) = dispense
        .as_ref()
        .map(|d| (d.patient_id.as_str(), d.licence.as_str()))
        .unwrap_or_default();
    let movements: Vec<(Movement, Uuid, Uuid)> = pieces
        .iter()
        .map(|p| {
            let m = Movement {
                batch_id: p.batch_id,
                delta: -p.quantity,
                kind: Kind::Sale,
                reference: Some(("sale", sale_id)),
                user_id: sale.user_id,
            };
            (m, p.medicine_id, sale.branch_id)
        })
        .collect();
    let mut feed = Vec::with_capacity(taken.len() + 1);
    for row in &taken {
        let batch = stock::Batch::from_row(row);
        feed.push((batch.rev, stock::change_of(&batch, Op::Update)?));
    }
    feed.push((
        rev,
        Change {
            entity: "sale",
            entity_id: made.id.to_string(),
            op: Op::Create,
            branch_id: Some(made.branch_id),
            payload: serde_json::to_value(&made).map_err(Error::internal)?,
        },
    ));
    // The sale row goes before its items and register rows (foreign keys).
    let mut writes = vec![stock::movements_stmt(&movements)];
    writes.extend(store_stmts(&made, sale, coupon.as_ref()));
    writes.extend(
        made.items
            .iter()
            .filter(|i| catalogue[&i.medicine_id].is_controlled)
            .map(|item| controlled_stmt(&made, item, patient, licence)),
    );
    writes.extend(overrides.iter().map(|o| override_stmt(&made, o)));
    // The prescription's updates after the sale row (its `sale_id` names it).
    let rx_from = writes.len();
    if let Some(d) = &dispense {
        writes.extend(d.stmts(&made));
    }
    let rx_to = writes.len();
    writes.extend(changes::append_all_stmt(feed).map(|q| Stmt::of(&q)));
    let answers = db::pipeline(tx, &writes).await?;
    // The prescription was locked and checked: every update finds its row.
    // Should one not, the CHECK on the lines has the last word, and the
    // sale fails as a fault.
    let rx_answers = answers.get(rx_from..rx_to).unwrap_or_default();
    if rx_answers.iter().any(Vec::is_empty) {
        return Err(Error::internal(
            "a prescription line changed under the sale's lock",
        ));
    }
    Ok(made)
}

/// The VAT an amount at `rate` (0.18 for 18 %) contains, VAT included:
/// `amount × rate / (1 + rate)`, rounded half up to 2 places. Applied per
/// line, so a sale's VAT is the sum of its lines' rounded VAT.
fn vat_included(amount: Decimal, rate: Decimal) -> Decimal {
    wire::two_places(amount * rate / (Decimal::ONE + rate))
}

/// A sale's figures, from its lines (each already rounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Totals {
    discount: Decimal,
    /// `total − vat`.
    subtotal: Decimal,
    vat: Decimal,
    /// What the customer pays: the lines' totals, VAT included.
    total: Decimal,
}

fn totals(items: &[SaleItem]) -> Totals {
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
fn percent(rate: Decimal) -> i32 {
    use rust_decimal::prelude::ToPrimitive;
    (rate * Decimal::ONE_HUNDRED)
        .round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
        .to_i32()
        .unwrap_or_default()
}

async fn usable_coupon<C: GenericClient + Sync>(tx: &C, code: &str) -> Result<Coupon> {
    let coupon = coupons::by_code(tx, code)
        .await?
        .ok_or_else(|| Error::validation("coupon_code", format!("There is no coupon {code}.")))?;
    coupons::check_usable(&coupon, Utc::now())?;
    Ok(coupon)
}

async fn user_name<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<String> {
    let q = Query::select()
        .column("full_name")
        .from("users")
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    Ok(db::fetch_opt(c, &q)
        .await?
        .map(|r| r.get(0))
        .unwrap_or_default())
}

struct Counter {
    icv: i64,
    previous_hash: String,
    branch_code: String,
}

impl Counter {
    fn from_row(r: &Row) -> Counter {
        Counter {
            icv: r.get(0),
            previous_hash: r.get(1),
            branch_code: r.get(2),
        }
    }
}

/// What the sale takes from each batch: pieces of one batch summed, in the
/// order the batches were picked.
fn per_batch(pieces: &[Piece]) -> Vec<(Uuid, i32)> {
    let mut takes: Vec<(Uuid, i32)> = Vec::new();
    for p in pieces {
        match takes.iter_mut().find(|(b, _)| *b == p.batch_id) {
            Some((_, qty)) => *qty += p.quantity,
            None => takes.push((p.batch_id, p.quantity)),
        }
    }
    takes
}

/// Takes the branch's next invoice number (no row when the branch has no
/// counter yet or cannot sell). The row stays locked until the sale
/// commits, so numbers are issued in commit order with no gap.
fn counter_stmt(branch_id: Uuid) -> Stmt {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE invoice_counters c SET last_icv = c.last_icv + 1
           FROM branches b
           WHERE c.branch_id = {branch_id} AND b.id = c.branch_id
             AND b.is_active AND NOT b.is_deleted
           RETURNING c.last_icv, c.last_hash, b.code"#
    );
    Stmt::raw(q.sql, q.values)
}

/// `counter_stmt` for a branch whose counter row may be missing: creates
/// it, then takes the number.
async fn bump_counter<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<Counter> {
    for _ in 0..2 {
        ensure_counter(tx, branch_id).await?;
        if let Some(r) = db::run(tx, &counter_stmt(branch_id)).await?.first() {
            return Ok(Counter::from_row(r));
        }
    }
    Err(Error::validation(
        "branch_id",
        "This branch is not active, so it cannot sell.",
    ))
}

/// Creates the branch's invoice counter row if it has none.
pub async fn ensure_counter<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO invoice_counters (branch_id, last_icv, last_hash)
           VALUES ({branch_id}, 0, {GENESIS_HASH}) ON CONFLICT (branch_id) DO NOTHING"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    Ok(())
}

/// Adds the sale to the branch's open cash session, if one is open (one row,
/// the session's id, or none).
fn session_stmt(sale: &NewSale, total: Decimal, vat: Decimal) -> Stmt {
    let (branch_id, method) = (sale.branch_id, sale.payment_method.as_str());
    let path = vec![method.to_owned()];
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE cash_sessions SET
             total_sales = total_sales + 1,
             total_revenue = total_revenue + {total},
             total_vat = total_vat + {vat},
             payment_breakdown = jsonb_set(payment_breakdown, {path},
               to_jsonb(coalesce((payment_breakdown ->> {method}::text)::numeric, 0) + {total}))
           WHERE branch_id = {branch_id} AND status = 'open'
           RETURNING id"#
    );
    Stmt::raw(q.sql, q.values)
}

/// The sale row, its items and the counter's new last hash, in that order.
fn store_stmts(s: &Sale, sale: &NewSale, coupon: Option<&Coupon>) -> [Stmt; 3] {
    let gross = s.total + s.discount;
    let insert = Query::insert()
        .into_table("sales")
        .columns([
            "id",
            "branch_id",
            "icv",
            "invoice_number",
            "customer_id",
            "prescription_id",
            "coupon_id",
            "coupon_code",
            "payment_method",
            "gross",
            "discount",
            "subtotal",
            "vat",
            "total",
            "cash_session_id",
            "device_id",
            "client_mutation_id",
            "request_digest",
            "previous_invoice_hash",
            "invoice_hash",
            "created_by",
            "rev",
            "created_at",
        ])
        .values_panic([
            s.id.into(),
            s.branch_id.into(),
            s.icv.into(),
            s.invoice_number.clone().into(),
            s.customer_id.into(),
            s.prescription_id.into(),
            coupon.map(|c| c.id).into(),
            s.coupon_code.clone().into(),
            s.payment_method.clone().into(),
            gross.into(),
            s.discount.into(),
            s.subtotal.into(),
            s.vat.into(),
            s.total.into(),
            s.cash_session_id.into(),
            s.device_id.into(),
            s.client_mutation_id.clone().into(),
            sale.digest().into(),
            s.previous_invoice_hash.clone().into(),
            s.invoice_hash.clone().into(),
            s.created_by.into(),
            s.rev.into(),
            s.created_at.into(),
        ])
        .to_owned();
    let mut items = Query::insert()
        .into_table("sale_items")
        .columns([
            "id",
            "sale_id",
            "line_no",
            "medicine_id",
            "batch_id",
            "quantity",
            "unit_price",
            "discount",
            "line_total",
            "vat_rate",
            "vat_amount",
            "cost_at_sale",
        ])
        .to_owned();
    for (n, i) in s.items.iter().enumerate() {
        items.values_panic([
            i.id.into(),
            s.id.into(),
            (n as i32).into(),
            i.medicine_id.into(),
            i.batch_id.into(),
            i.quantity.into(),
            i.unit_price.into(),
            i.discount.into(),
            i.line_total.into(),
            (Decimal::from(i.vat_rate) / Decimal::ONE_HUNDRED).into(),
            i.vat_amount.into(),
            i.cost_at_sale.into(),
        ]);
    }
    let (branch_id, hash) = (s.branch_id, s.invoice_hash.clone());
    let last_hash = sea_query::raw_query!(
        PostgresQueryBuilder,
        "UPDATE invoice_counters SET last_hash = {hash} WHERE branch_id = {branch_id}"
    );
    [
        Stmt::of(&insert),
        Stmt::of(&items),
        Stmt::raw(last_hash.sql, last_hash.values),
    ]
}

/// The controlled-drugs register row of a sale line.
fn controlled_stmt(s: &Sale, item: &SaleItem, patient: &str, licence: &str) -> Stmt {
    let q = Query::insert()
        .into_table("controlled_dispenses")
        .columns([
            "id",
            "sale_id",
            "branch_id",
            "medicine_id",
            "quantity",
            "patient_national_id",
            "doctor_license",
            "dispensed_by",
            "dispensed_at",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            s.id.into(),
            s.branch_id.into(),
            item.medicine_id.into(),
            item.quantity.into(),
            patient.into(),
            licence.into(),
            s.created_by.into(),
            s.created_at.into(),
        ])
        .to_owned();
    Stmt::of(&q)
}

const SALE_COLUMNS: &str = "s.id, s.branch_id, s.icv, s.invoice_number, s.customer_id, \
    s.prescription_id, s.coupon_code, s.payment_method, s.discount, s.subtotal, s.vat, s.total, \
    s.cash_session_id, s.device_id, s.client_mutation_id, s.status, s.previous_invoice_hash, \
    s.invoice_hash, s.created_by, coalesce(u.full_name, '') AS created_by_name, s.rev, s.created_at";

fn sale_from_row(r: &Row) -> Sale {
    Sale {
        id: r.get("id"),
        branch_id: r.get("branch_id"),
        icv: r.get("icv"),
        invoice_number: r.get("invoice_number"),
        customer_id: r.get("customer_id"),
        prescription_id: r.get("prescription_id"),
        coupon_code: r.get("coupon_code"),
        payment_method: r.get("payment_method"),
        discount: r.get("discount"),
        subtotal: r.get("subtotal"),
        vat: r.get("vat"),
        total: r.get("total"),
        cash_session_id: r.get("cash_session_id"),
        device_id: r.get("device_id"),
        client_mutation_id: r.get("client_mutation_id"),
        status: r.get("status"),
        previous_invoice_hash: r.get("previous_invoice_hash"),
        invoice_hash: r.get("invoice_hash"),
        created_by: r.get("created_by"),
        created_by_name: r.get("created_by_name"),
        rev: r.get("rev"),
        created_at: r.get("created_at"),
        items: Vec::new(),
    }
}

fn item_from_row(r: &Row) -> SaleItem {
    let rate: Decimal = r.get("vat_rate");
    SaleItem {
        id: r.get("id"),
        medicine_id: r.get("medicine_id"),
        medicine_name: r.get("medicine_name"),
        batch_id: r.get("batch_id"),
        quantity: r.get("quantity"),
        unit_price: r.get("unit_price"),
        discount: r.get("discount"),
        line_total: r.get("line_total"),
        vat_rate: percent(rate),
        vat_amount: r.get("vat_amount"),
        cost_at_sale: r.get("cost_at_sale"),
    }
}

/// Fills in the lines of `sales`.
async fn with_items<C: GenericClient + Sync>(c: &C, mut sales: Vec<Sale>) -> Result<Vec<Sale>> {
    if sales.is_empty() {
        return Ok(sales);
    }
    let ids: Vec<Uuid> = sales.iter().map(|s| s.id).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT i.*, m.name AS medicine_name FROM sale_items i
           JOIN medicines m ON m.id = i.medicine_id
           WHERE i.sale_id = ANY({ids}) ORDER BY i.sale_id, i.line_no, i.id"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let mut by_sale: HashMap<Uuid, Vec<SaleItem>> = HashMap::new();
    for r in &rows {
        by_sale
            .entry(r.get("sale_id"))
            .or_default()
            .push(item_from_row(r));
    }
    for s in &mut sales {
        s.items = by_sale.remove(&s.id).unwrap_or_default();
    }
    Ok(sales)
}

/// One sale with its lines.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Sale>> {
    let rows = select_sales(c, |q| {
        q.and_where(Expr::col(("s", "id")).eq(id));
    })
    .await?;
    Ok(with_items(c, rows).await?.into_iter().next())
}

/// Filters for a sales list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub branch_id: Option<Uuid>,
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Newest first, paged; returns the page and the total.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &ListFilter,
    offset: u64,
    limit: u64,
) -> Result<(Vec<Sale>, i64)> {
    let filter = |q: &mut sea_query::SelectStatement| {
        if let Some(b) = f.branch_id {
            q.and_where(Expr::col(("s", "branch_id")).eq(b));
        }
        if let Some(from) = f.from {
            q.and_where(Expr::col(("s", "created_at")).gte(from));
        }
        if let Some(until) = f.until {
            q.and_where(Expr::col(("s", "created_at")).lt(until));
        }
    };
    let mut count = Query::select()
        .expr(Expr::cust("count(*)"))
        .from_as("sales", "s")
        .to_owned();
    filter(&mut count);
    let total: i64 = db::fetch_one(c, &count).await?.get(0);
    let rows = select_sales(c, |q| {
        filter(q);
        q.order_by(("s", "created_at"), Order::Desc)
            .order_by(("s", "id"), Order::Desc)
            .offset(offset)
            .limit(limit);
    })
    .await?;
    Ok((with_items(c, rows).await?, total))
}

async fn select_sales<C: GenericClient + Sync>(
    c: &C,
    shape: impl FnOnce(&mut sea_query::SelectStatement),
) -> Result<Vec<Sale>> {
    let mut q = Query::select()
        .expr(Expr::cust(SALE_COLUMNS))
        .from_as("sales", "s")
        .join_as(
            sea_query::JoinType::LeftJoin,
            "users",
            "u",
            Expr::col(("u", "id")).equals(("s", "created_by")),
        )
        .to_owned();
    shape(&mut q);
    Ok(db::fetch_all(c, &q)
        .await?
        .iter()
        .map(sale_from_row)
        .collect())
}

/// The result of checking a branch's invoice chain.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ChainReport {
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// `ok` or `broken`.
    pub status: String,
    /// Invoices checked.
    pub checked: i64,
    /// The first invoice whose link does not hold, when broken.
    pub first_broken: Option<BrokenLink>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BrokenLink {
    pub icv: i64,
    pub invoice_number: String,
    #[schema(value_type = String)]
    pub sale_id: Uuid,
    pub reason: String,
}

/// Walks a branch's invoices in icv order, recomputing every hash: the
/// first missing number, wrong previous hash or altered invoice is reported.
pub async fn verify_chain<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<ChainReport> {
    const CHUNK: u64 = 500;
    let mut expected_prev = GENESIS_HASH.to_owned();
    let mut expected_icv = 1i64;
    let mut checked = 0i64;
    let broken = |s: &Sale, reason: &str, checked| ChainReport {
        branch_id,
        status: "broken".to_owned(),
        checked,
        first_broken: Some(BrokenLink {
            icv: s.icv,
            invoice_number: s.invoice_number.clone(),
            sale_id: s.id,
            reason: reason.to_owned(),
        }),
    };
    loop {
        let after = expected_icv - 1;
        let page = select_sales(c, |q| {
            q.and_where(Expr::col(("s", "branch_id")).eq(branch_id))
                .and_where(Expr::col(("s", "icv")).gt(after))
                .order_by(("s", "icv"), Order::Asc)
                .limit(CHUNK);
        })
        .await?;
        let done = (page.len() as u64) < CHUNK;
        for s in with_items(c, page).await? {
            checked += 1;
            if s.icv != expected_icv {
                return Ok(broken(&s, "invoice numbers skip or repeat here", checked));
            }
            if s.previous_invoice_hash != expected_prev {
                return Ok(broken(
                    &s,
                    "previous_invoice_hash does not match the previous invoice",
                    checked,
                ));
            }
            if invoice_hash(&s, s.created_at) != s.invoice_hash {
                return Ok(broken(
                    &s,
                    "the invoice content does not match its hash",
                    checked,
                ));
            }
            expected_prev = s.invoice_hash.clone();
            expected_icv += 1;
        }
        if done {
            break;
        }
    }
    Ok(ChainReport {
        branch_id,
        status: "ok".to_owned(),
        checked,
        first_broken: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
