//! Customer balances and their ledger. A balance moves only by a conditional
//! update in the same transaction as its ledger row, so it never goes below
//! zero (also a CHECK) or past the credit limit, whatever the number of
//! server processes.
//!
//! Over 600 lines because every movement of a balance (charge, payment,
//! refund) shares the one conditional-update-plus-ledger-row routine here;
//! splitting it would put the invariant's code in several places.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Query, UpdateStatement};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::{self, Stmt, Tx};
use crate::error::{Code, Error, Result};
use crate::idempotency::{self, Key, RequestDigest, Scope};
use crate::sync::changes::{self, Change, Op};
use crate::users::sessions::{self, Signer};
use crate::wire;

/// The snapshot Customer shape (numbers, 0/1 flags), plus `rev`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Customer {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub name: String,
    pub phone: String,
    pub national_id: String,
    pub notes: String,
    pub image_url: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_credit_allowed: bool,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub credit_limit: Decimal,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub current_balance: Decimal,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_deleted: bool,
    pub rev: i64,
}

pub const COLUMNS: [&str; 13] = [
    "id",
    "name",
    "phone",
    "national_id",
    "notes",
    "image_url",
    "created_at",
    "updated_at",
    "is_credit_allowed",
    "credit_limit",
    "current_balance",
    "is_deleted",
    "rev",
];

impl Customer {
    pub fn from_row(r: &Row) -> Self {
        Customer {
            id: r.get("id"),
            name: r.get("name"),
            phone: r.get("phone"),
            national_id: r.get("national_id"),
            notes: r.get("notes"),
            image_url: r.get("image_url"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
            is_credit_allowed: r.get("is_credit_allowed"),
            credit_limit: r.get("credit_limit"),
            current_balance: r.get("current_balance"),
            is_deleted: r.get("is_deleted"),
            rev: r.get("rev"),
        }
    }
}

/// The customer endpoints' shape: money as decimal strings, the credit flag
/// as a boolean.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CustomerView {
    #[schema(value_type = String)]
    pub id: Uuid,
    pub name: String,
    pub phone: String,
    pub national_id: String,
    pub notes: String,
    pub image_url: String,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "50000.00")]
    pub credit_limit: Decimal,
    /// What the customer owes.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "12000.00")]
    pub current_balance: Decimal,
    pub is_credit_allowed: bool,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

impl Customer {
    pub fn view(&self) -> CustomerView {
        CustomerView {
            id: self.id,
            name: self.name.clone(),
            phone: self.phone.clone(),
            national_id: self.national_id.clone(),
            notes: self.notes.clone(),
            image_url: self.image_url.clone(),
            credit_limit: self.credit_limit,
            current_balance: self.current_balance,
            is_credit_allowed: self.is_credit_allowed,
            rev: self.rev,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A live customer.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Customer>> {
    let q = Query::select()
        .columns(COLUMNS)
        .from(Table::Customers)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Customer::from_row(&r)))
}

pub async fn emit<C: GenericClient + Sync>(
    tx: &C,
    rev: i64,
    customer: &Customer,
    op: Op,
) -> Result<()> {
    changes::append(tx, rev, customer_change(customer, op)?).await
}

pub(super) fn customer_change(customer: &Customer, op: Op) -> Result<Change<'static>> {
    Ok(Change {
        entity: "customer",
        entity_id: customer.id.to_string(),
        op,
        branch_id: None,
        payload: serde_json::to_value(customer).map_err(Error::internal)?,
    })
}

pub(super) fn ledger_change(row: &LedgerRow) -> Result<Change<'static>> {
    Ok(Change {
        entity: "customer_ledger",
        entity_id: row.id.to_string(),
        op: Op::Create,
        branch_id: row.branch_id,
        payload: serde_json::to_value(row).map_err(Error::internal)?,
    })
}

/// The revs of a balance move: the customer row's change comes first.
#[derive(Clone, Copy)]
struct Revs {
    customer: i64,
    ledger: i64,
}

async fn allocate_revs<C: GenericClient + Sync>(tx: &C) -> Result<Revs> {
    match changes::allocate_many(tx, 2).await?.as_slice() {
        &[customer, ledger] => Ok(Revs { customer, ledger }),
        _ => Err(Error::internal("nextval returned the wrong number of revs")),
    }
}

/// Raises the balance of a credit customer by `amount`, within the credit
/// limit, and writes the `SALE` ledger row. 400 naming the figures otherwise.
pub async fn charge<C: GenericClient + Sync>(
    tx: &C,
    customer_id: Uuid,
    amount: Decimal,
    sale: (Uuid, Uuid),
    user_id: Uuid,
) -> Result<Customer> {
    let revs = allocate_revs(tx).await?;
    let q = Query::update()
        .table(Table::Customers)
        .value("current_balance", Expr::col("current_balance").add(amount))
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(customer_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_credit_allowed").eq(true))
        .and_where(
            Expr::col("current_balance")
                .add(amount)
                .lte(Expr::col("credit_limit")),
        )
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let (sale_id, branch_id) = sale;
    let entry = LedgerEntry {
        customer_id,
        branch_id: Some(branch_id),
        transaction_type: "SALE",
        amount,
        reference_id: Some(sale_id),
        notes: String::new(),
        user_id,
        mutation: None,
    };
    match move_balance(tx, revs, q, entry).await? {
        Some((customer, _)) => Ok(customer),
        None => Err(refusal(tx, customer_id, amount).await),
    }
}

/// Lowers a customer's balance by a credit refund of `amount` (a credit
/// note refunded to the account) and writes the `REFUND` ledger row,
/// never below zero: 400 naming both figures otherwise, so the rest is
/// refunded another way. `credit_note` is (credit note id, branch id).
pub async fn refund<C: GenericClient + Sync>(
    tx: &C,
    customer_id: Uuid,
    amount: Decimal,
    credit_note: (Uuid, Uuid),
    user_id: Uuid,
) -> Result<Customer> {
    let revs = allocate_revs(tx).await?;
    let q = Query::update()
        .table(Table::Customers)
        .value("current_balance", Expr::col("current_balance").sub(amount))
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(customer_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("current_balance").gte(amount))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let (credit_note_id, branch_id) = credit_note;
    let entry = LedgerEntry {
        customer_id,
        branch_id: Some(branch_id),
        transaction_type: "REFUND",
        amount,
        reference_id: Some(credit_note_id),
        notes: String::new(),
        user_id,
        mutation: None,
    };
    if amount > Decimal::ZERO {
        if let Some((customer, _)) = move_balance(tx, revs, q, entry).await? {
            return Ok(customer);
        }
    }
    let customer = get(tx, customer_id).await?.ok_or_else(|| {
        Error::validation(
            "refund_method",
            "The sale's customer no longer exists, so nothing can be credited to an account: \
             refund another way.",
        )
    })?;
    if amount <= Decimal::ZERO {
        return Ok(customer);
    }
    Err(Error::rule(
        Code::AmountExceedsBalance,
        "refund_method",
        format!(
            "A credit refund of {} would take {}'s balance of {} below zero: credit at most {} \
             to the account and refund the rest another way.",
            wire::two_places(amount),
            customer.name,
            wire::two_places(customer.current_balance),
            wire::two_places(customer.current_balance)
        ),
    ))
}

/// Why a credit charge was refused.
async fn refusal<C: GenericClient + Sync>(tx: &C, customer_id: Uuid, amount: Decimal) -> Error {
    let customer = match get(tx, customer_id).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Error::validation("customer_id", "`customer_id` names no customer.");
        }
        Err(e) => return e,
    };
    if !customer.is_credit_allowed {
        return Error::rule(
            Code::CreditLimitExceeded,
            "customer_id",
            format!("{} is not allowed to buy on credit.", customer.name),
        );
    }
    Error::rule(
        Code::CreditLimitExceeded,
        "payment_method",
        format!(
            "This credit sale of {} would take {}'s balance of {} past the credit limit of {}.",
            wire::two_places(amount),
            customer.name,
            wire::two_places(customer.current_balance),
            wire::two_places(customer.credit_limit)
        ),
    )
}

/// The ledger row of a balance move; its `balance_after` is the balance the
/// move left.
struct LedgerEntry {
    customer_id: Uuid,
    branch_id: Option<Uuid>,
    /// `OPENING`, `SALE`, `PAYMENT` or `REFUND`.
    transaction_type: &'static str,
    amount: Decimal,
    reference_id: Option<Uuid>,
    notes: String,
    user_id: Uuid,
    /// A payment's client mutation id and request digest.
    mutation: Option<(String, String)>,
}

/// The synced ledger row shape.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LedgerRow {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub customer_id: Uuid,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    pub transaction_type: String,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub amount: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub balance_after: Decimal,
    #[schema(value_type = Option<String>)]
    pub reference_id: Option<Uuid>,
    pub notes: String,
    #[schema(value_type = Option<String>)]
    pub created_by: Option<Uuid>,
    pub created_by_name: String,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

/// Runs `update` (a conditional UPDATE of one customer returning `COLUMNS`)
/// with `rev = revs.customer` and writes the move's ledger row in the same
/// round trip, then both change rows. `None`, with nothing written, when the
/// update matched no row.
async fn move_balance<C: GenericClient + Sync>(
    tx: &C,
    revs: Revs,
    mut update: UpdateStatement,
    e: LedgerEntry,
) -> Result<Option<(Customer, LedgerRow)>> {
    update.value("rev", revs.customer);
    let id = Uuid::now_v7();
    let (customer_id, branch_id, user_id) = (e.customer_id, e.branch_id, e.user_id);
    let (kind, amount, reference, notes) = (e.transaction_type, e.amount, e.reference_id, e.notes);
    let (cmid, digest) = e.mutation.unzip();
    let (rev, customer_rev) = (revs.ledger, revs.customer);
    // Pipelined after the update, the insert reads the balance it left from
    // the row carrying its fresh rev, so it writes nothing when the update
    // matched nothing. A mutation id already used for this customer fails
    // the unique index: a conflict, which the payment answers with a replay.
    let insert = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH row AS (
             INSERT INTO customer_ledger (id, customer_id, branch_id, transaction_type, amount,
                                          balance_after, reference_id, notes, created_by, rev,
                                          client_mutation_id, request_digest)
             SELECT {id}, c.id, {branch_id}, {kind}, {amount}, c.current_balance, {reference},
                    {notes}, {user_id}, {rev}, {cmid}, {digest}
             FROM customers c
             WHERE c.id = {customer_id} AND c.rev = {customer_rev}
             RETURNING *)
           SELECT row.*, coalesce(u.full_name, '') AS created_by_name
           FROM row LEFT JOIN users u ON u.id = row.created_by"#
    );
    let stmts = [Stmt::of(&update), Stmt::raw(insert.sql, insert.values)];
    let [updated, inserted]: [Vec<Row>; 2] = db::pipeline(tx, &stmts)
        .await?
        .try_into()
        .map_err(|_| Error::internal("the balance move's pipeline answered short"))?;
    let Some(customer) = updated.first().map(Customer::from_row) else {
        return Ok(None);
    };
    let ledger = inserted
        .first()
        .map(ledger_row)
        .ok_or_else(|| Error::internal("ledger insert returned no row"))?;
    let rows = vec![
        (revs.customer, customer_change(&customer, Op::Update)?),
        (revs.ledger, ledger_change(&ledger)?),
    ];
    changes::append_all(tx, rows).await?;
    Ok(Some((customer, ledger)))
}

pub fn ledger_row(r: &Row) -> LedgerRow {
    LedgerRow {
        id: r.get("id"),
        customer_id: r.get("customer_id"),
        branch_id: r.get("branch_id"),
        transaction_type: r.get("transaction_type"),
        amount: r.get("amount"),
        balance_after: r.get("balance_after"),
        reference_id: r.get("reference_id"),
        notes: r.get("notes"),
        created_by: r.get("created_by"),
        created_by_name: r.get("created_by_name"),
        rev: r.get("rev"),
        created_at: r.get("created_at"),
    }
}

/// The spec's 201 answer to a payment.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PaymentReceipt {
    #[schema(value_type = String)]
    pub ledger_id: Uuid,
    #[schema(value_type = String)]
    pub customer_id: Uuid,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub amount_paid: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub previous_balance: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub new_balance: Decimal,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub paid_at: DateTime<Utc>,
    /// A retry of an earlier payment with the same mutation id.
    #[serde(skip)]
    pub replayed: bool,
}

/// A payment against a customer's balance, through the branch actor where
/// it is taken (grouped with the branch's other payments: `payments`). The conditional update (`current_balance >= amount`) keeps
/// the balance from going below zero whatever the number of processes.
#[derive(Debug, Clone)]
pub struct RecordPayment {
    pub customer_id: Uuid,
    pub branch_id: Uuid,
    pub amount: Decimal,
    pub notes: String,
    pub user_id: Uuid,
    /// The client's id for this payment: a retry with it has one effect.
    pub client_mutation_id: Option<String>,
    /// The token to check with the payment's first statement, when the
    /// caller was not checked before (`POST /customers/{id}/payments`).
    pub signer: Option<Signer>,
}

impl RecordPayment {
    /// What tells a retry from a different payment under the same id: the
    /// branch and the amount, as text.
    pub(super) fn digest(&self) -> RequestDigest {
        RequestDigest::text(format!(
            "{}:{}",
            self.branch_id,
            wire::two_places(self.amount)
        ))
    }

    /// The key its mutation id holds in the customer's ledger.
    pub(super) fn key(&self) -> Option<Key<'_>> {
        Some(Key {
            table: "customer_ledger",
            scope: Scope::Customer(self.customer_id),
            client_mutation_id: self.client_mutation_id.as_deref()?,
        })
    }
}

impl actors::runtime::Command for RecordPayment {
    type Error = crate::Error;
    type Output = PaymentReceipt;
    const NAME: &'static str = "record_payment";

    async fn run(self, pool: crate::db::Pool) -> Result<PaymentReceipt> {
        let client = pool.get().await?;
        // BEGIN, the caller check and the retry lookup go out with the rev
        // allocation (one round trip); a refusal or a replay drops the
        // transaction, which rolls the allocation back.
        let tx = Tx::begin(&client);
        let (checked, done, revs) = futures_util::join!(
            sessions::check_signers(&*tx, std::slice::from_ref(&self.signer)),
            lookup_payment(&*tx, &self),
            allocate_revs(&*tx)
        );
        checked?.into_iter().try_for_each(|c| c)?;
        let (done, revs) = (done?, revs?);
        if let Some(done) = done {
            return Ok(done);
        }
        let attempt = match pay_at(&*tx, revs, &self).await {
            Ok(receipt) => {
                tx.commit().await?;
                Ok(receipt)
            }
            Err(e) => {
                drop(tx);
                Err(e)
            }
        };
        // Another process recorded the same mutation id first: its payment.
        let keyed = self.client_mutation_id.is_some();
        idempotency::replay_after_race(attempt, keyed, "payment", || lookup_payment(&client, &self))
            .await
    }
}

/// The receipt of the earlier payment with this mutation id, if any; 409
/// when that id was used for a different payment.
pub(super) async fn lookup_payment<C: GenericClient + Sync>(
    c: &C,
    p: &RecordPayment,
) -> Result<Option<PaymentReceipt>> {
    let found = idempotency::lookup(c, p.key(), &p.digest(), &RECEIPT_COLUMNS).await?;
    Ok(found
        .or_refuse("payment")?
        .map(|row| replayed_receipt(p, &row)))
}

/// The ledger columns a replayed payment's receipt is made of.
const RECEIPT_COLUMNS: [&str; 4] = ["id", "amount", "balance_after", "created_at"];

fn replayed_receipt(p: &RecordPayment, row: &Row) -> PaymentReceipt {
    let (amount, after): (Decimal, Decimal) = (row.get("amount"), row.get("balance_after"));
    PaymentReceipt {
        ledger_id: row.get("id"),
        customer_id: p.customer_id,
        amount_paid: amount,
        previous_balance: after + amount,
        new_balance: after,
        paid_at: row.get("created_at"),
        replayed: true,
    }
}

/// `lookup_payment` for a group, in one statement of constant text: per
/// payment, its earlier receipt, the refusal of a reused mutation id, or
/// nothing. A group with no mutation id reads nothing.
pub(super) async fn lookup_payments<C: GenericClient + Sync>(
    c: &C,
    payments: &[RecordPayment],
) -> Result<Vec<Result<Option<PaymentReceipt>>>> {
    let keyed: Vec<(usize, &RecordPayment, &str)> = payments
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p, p.client_mutation_id.as_deref()?)))
        .collect();
    let mut found: Vec<Option<Row>> = payments.iter().map(|_| None).collect();
    if !keyed.is_empty() {
        let ords: Vec<i64> = keyed.iter().map(|k| k.0 as i64).collect();
        let customers: Vec<Uuid> = keyed.iter().map(|k| k.1.customer_id).collect();
        let ids: Vec<String> = keyed.iter().map(|k| k.2.to_owned()).collect();
        // The scope of `RecordPayment::key`: the id within the customer.
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"SELECT k.ord, l.id, l.amount, l.balance_after, l.created_at, l.request_digest
               FROM unnest({ords}::int8[], {customers}::uuid[], {ids}::text[]) AS k(ord, customer, cmid)
               JOIN customer_ledger l ON l.customer_id = k.customer AND l.client_mutation_id = k.cmid"#
        );
        for row in db::raw_all(c, &q.sql, q.values).await? {
            let ord: i64 = row.get("ord");
            if let Some(slot) = found.get_mut(ord as usize) {
                *slot = Some(row);
            }
        }
    }
    Ok(payments
        .iter()
        .zip(found)
        .map(|(p, row)| {
            let Some(row) = row else { return Ok(None) };
            let stored: Option<String> = row.get(idempotency::DIGEST_COLUMN);
            idempotency::judge(Some((stored.as_deref(), row)), &p.digest())
                .or_refuse("payment")
                .map(|row| row.map(|row| replayed_receipt(p, &row)))
        })
        .collect())
}

/// Records a payment in `tx`; the caller commits.
pub async fn pay<C: GenericClient + Sync>(tx: &C, p: RecordPayment) -> Result<PaymentReceipt> {
    let revs = allocate_revs(tx).await?;
    pay_at(tx, revs, &p).await
}

async fn pay_at<C: GenericClient + Sync>(
    tx: &C,
    revs: Revs,
    p: &RecordPayment,
) -> Result<PaymentReceipt> {
    let amount = p.amount;
    let moved = if amount > Decimal::ZERO {
        let q = Query::update()
            .table(Table::Customers)
            .value("current_balance", Expr::col("current_balance").sub(amount))
            .value("updated_at", Utc::now())
            .and_where(Expr::col("id").eq(p.customer_id))
            .and_where(Expr::col("is_deleted").eq(false))
            .and_where(Expr::col("current_balance").gte(amount))
            .returning(Query::returning().columns(COLUMNS))
            .to_owned();
        let mutation = p
            .client_mutation_id
            .clone()
            .map(|id| (id, p.digest().into_string()));
        let entry = LedgerEntry {
            customer_id: p.customer_id,
            branch_id: Some(p.branch_id),
            transaction_type: "PAYMENT",
            amount,
            reference_id: None,
            notes: p.notes.clone(),
            user_id: p.user_id,
            mutation,
        };
        move_balance(tx, revs, q, entry).await?
    } else {
        None
    };
    let Some((customer, ledger)) = moved else {
        let customer = get(tx, p.customer_id)
            .await?
            .ok_or_else(|| Error::not_found("Customer not found"))?;
        return Err(Error::rule(
                Code::AmountExceedsBalance,
                "amount",
                format!(
                    "A payment must be more than 0 and at most the balance: {} was offered against a balance of {}.",
                    wire::two_places(amount),
                    wire::two_places(customer.current_balance)
                ),
            ));
    };
    Ok(PaymentReceipt {
        ledger_id: ledger.id,
        customer_id: customer.id,
        amount_paid: amount,
        previous_balance: customer.current_balance + amount,
        new_balance: customer.current_balance,
        paid_at: ledger.created_at,
        replayed: false,
    })
}
