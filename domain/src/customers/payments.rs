//! Payments grouped per branch: the branch's queued payments made in one
//! transaction of set-based statements, in a constant number of round
//! trips however many there are.
//!
//! 1. One pipelined round trip of five statements: the callers' tokens,
//!    the payments' retry lookups (one statement for the group), the
//!    customers paid (locked `FOR UPDATE`, in id order), the payers' names
//!    with the transaction's time, and two revs per payment.
//! 2. Planning in Rust, in order: a customer paid twice sees the first
//!    payment's balance; a payment above the balance gets the same 400 it
//!    would get alone, and leaves the group.
//! 3. One pipelined round trip: the customers' balances by compare-and-set
//!    (`WHERE current_balance = what was read`), the ledger rows and the
//!    change-log rows, each one statement with constant text (`unnest`).
//!
//! The database keeps the invariants as for a payment alone (balance CHECK,
//! the mutation id's unique index); any refusal of it is a fault, after
//! which the group's payments are made one at a time.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use uuid::Uuid;

use super::balance::{customer_change, ledger_change, lookup_payments};
use super::{Customer, LedgerRow, PaymentReceipt, RecordPayment};
use crate::db::{self, Pool, Stmt, Tx};
use crate::error::{Code, Error, Result};
use crate::group_commit::{Desk, Group};
use crate::idempotency;
use crate::sync::changes;
use crate::users::sessions;
use crate::wire;
use actors::runtime::Command;

/// Payments, grouped per branch.
pub struct Payments;

/// Where `POST /customers/{id}/payments` hands its payments.
pub type PaymentDesk = Desk<Payments>;

impl Group for Payments {
    type Request = RecordPayment;
    type Output = PaymentReceipt;
    const NAME: &'static str = "record_payments";
    const LABEL: &'static str = "payment";

    async fn together(
        pool: &Pool,
        requests: &[RecordPayment],
    ) -> Result<Vec<Result<PaymentReceipt>>> {
        let client = pool.get().await?;
        let tx = Tx::begin(&client);
        let answers = pay_all(&*tx, requests).await?;
        tx.commit().await?;
        Ok(answers)
    }

    async fn alone(pool: &Pool, request: RecordPayment) -> Result<PaymentReceipt> {
        request.run(pool.clone()).await
    }
}

/// A planned payment: the customer after it, the balance before it, its
/// ledger row and its mutation id with the request's digest.
type Move = (Customer, Decimal, LedgerRow, Option<(String, String)>);

/// What the group read and locked in its first round trip.
struct Read {
    /// Per payment: whether its caller's token still stands.
    checks: Vec<Result<()>>,
    /// Per payment: the earlier receipt of its mutation id, a refusal of
    /// that id, or nothing (a new payment).
    replays: Vec<Result<Option<PaymentReceipt>>>,
    customers: HashMap<Uuid, Customer>,
    names: HashMap<Uuid, String>,
    now: DateTime<Utc>,
    revs: Vec<i64>,
}

/// Makes the payments in `tx`: the outer error is a fault, the inner ones
/// each payment's answer.
async fn pay_all<C: GenericClient + Sync>(
    tx: &C,
    payments: &[RecordPayment],
) -> Result<Vec<Result<PaymentReceipt>>> {
    if has_repeated_key(payments) {
        // Two requests with one mutation id: the one-by-one path replays
        // the second.
        return Err(Error::busy("a mutation id repeats within the group"));
    }
    let mut read = read(tx, payments).await?;
    let mut answers = Vec::with_capacity(payments.len());
    let mut moves: Vec<Move> = Vec::new();
    let mut revs = std::mem::take(&mut read.revs).into_iter();
    let checks = std::mem::take(&mut read.checks);
    for ((p, replay), check) in payments
        .iter()
        .zip(std::mem::take(&mut read.replays))
        .zip(checks)
    {
        let (customer_rev, ledger_rev) = (revs.next(), revs.next());
        if let Err(refused) = check {
            // The caller's token no longer stands: its 401, nothing paid.
            answers.push(Err(refused));
            continue;
        }
        match replay {
            Ok(Some(done)) => {
                answers.push(Ok(done));
                continue;
            }
            Err(refused) if refused.is_refusal() => {
                answers.push(Err(refused));
                continue;
            }
            Err(fault) => return Err(fault),
            Ok(None) => {}
        }
        let (Some(customer_rev), Some(ledger_rev)) = (customer_rev, ledger_rev) else {
            return Err(Error::internal("too few revs for the payments"));
        };
        let Some(customer) = read.customers.get_mut(&p.customer_id) else {
            answers.push(Err(Error::not_found("Customer not found")));
            continue;
        };
        if p.amount <= Decimal::ZERO || customer.current_balance < p.amount {
            answers.push(Err(exceeds_balance(p.amount, customer.current_balance)));
            continue;
        }
        let before = customer.current_balance;
        customer.current_balance -= p.amount;
        customer.rev = customer_rev;
        customer.updated_at = read.now;
        let ledger = LedgerRow {
            id: Uuid::now_v7(),
            customer_id: p.customer_id,
            branch_id: Some(p.branch_id),
            transaction_type: "PAYMENT".to_owned(),
            amount: p.amount,
            balance_after: customer.current_balance,
            reference_id: None,
            notes: p.notes.clone(),
            created_by: Some(p.user_id),
            created_by_name: read.names.get(&p.user_id).cloned().unwrap_or_default(),
            rev: ledger_rev,
            created_at: read.now,
        };
        answers.push(Ok(PaymentReceipt {
            ledger_id: ledger.id,
            customer_id: p.customer_id,
            amount_paid: p.amount,
            previous_balance: before,
            new_balance: customer.current_balance,
            paid_at: read.now,
            replayed: false,
        }));
        let mutation = p
            .client_mutation_id
            .clone()
            .map(|id| (id, p.digest().into_string()));
        moves.push((customer.clone(), before, ledger, mutation));
    }
    if !moves.is_empty() {
        write(tx, &moves, read.now).await?;
    }
    Ok(answers)
}

fn has_repeated_key(payments: &[RecordPayment]) -> bool {
    idempotency::earlier_with_same_key(payments.iter().map(RecordPayment::key))
        .iter()
        .any(Option::is_some)
}

/// The refusal a payment alone gives when it is not within the balance.
fn exceeds_balance(amount: Decimal, balance: Decimal) -> Error {
    Error::rule(
        Code::AmountExceedsBalance,
        "amount",
        format!(
            "A payment must be more than 0 and at most the balance: {} was offered against a balance of {}.",
            wire::two_places(amount),
            wire::two_places(balance)
        ),
    )
}

async fn read<C: GenericClient + Sync>(tx: &C, payments: &[RecordPayment]) -> Result<Read> {
    let mut ids: Vec<Uuid> = payments.iter().map(|p| p.customer_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut users: Vec<Uuid> = payments.iter().map(|p| p.user_id).collect();
    users.sort_unstable();
    users.dedup();
    // Polled in order, so sent in order: one round trip of five statements.
    // The columns of `COLUMNS`, in its order (`Customer::from_row`).
    let lock = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, name, phone, national_id, notes, image_url, created_at, updated_at,
                  is_credit_allowed, credit_limit, current_balance, is_deleted, rev
           FROM customers WHERE id = ANY({ids}) AND NOT is_deleted ORDER BY id FOR UPDATE"#
    );
    // The transaction's time rides on the payers' names (an aggregate:
    // always one row).
    let names = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT now(), array_agg(id), array_agg(full_name) FROM users WHERE id = ANY({users})"
    );
    let signers: Vec<_> = payments.iter().map(|p| p.signer).collect();
    let (checks, found) = futures_util::join!(sessions::check_signers(tx, &signers), async {
        futures_util::try_join!(
            lookup_payments(tx, payments),
            db::raw_all(tx, &lock.sql, lock.values.clone()),
            db::raw_all(tx, &names.sql, names.values.clone()),
            changes::allocate_many(tx, payments.len() * 2),
        )
    });
    let (replays, locked, names, revs) = found?;
    let names = names
        .first()
        .ok_or_else(|| Error::internal("the payers' names came back without a row"))?;
    let now = names.get(0);
    let (ids, full): (Option<Vec<Uuid>>, Option<Vec<String>>) = (names.get(1), names.get(2));
    Ok(Read {
        checks: checks?,
        replays,
        customers: locked
            .iter()
            .map(|r| {
                let c = Customer::from_row(r);
                (c.id, c)
            })
            .collect(),
        names: ids
            .into_iter()
            .flatten()
            .zip(full.into_iter().flatten())
            .collect(),
        now,
        revs,
    })
}

/// The second round trip: balances, ledger rows and change-log rows.
async fn write<C: GenericClient + Sync>(tx: &C, moves: &[Move], now: DateTime<Utc>) -> Result<()> {
    // Per customer: the balance first read and the last one planned.
    let mut last: Vec<(Uuid, Decimal, Decimal, i64)> = Vec::new();
    for (c, before, _, _) in moves {
        match last.iter_mut().find(|l| l.0 == c.id) {
            Some(l) => {
                l.2 = c.current_balance;
                l.3 = c.rev;
            }
            None => last.push((c.id, *before, c.current_balance, c.rev)),
        }
    }
    let ids: Vec<Uuid> = last.iter().map(|l| l.0).collect();
    let expected: Vec<String> = last.iter().map(|l| l.1.to_string()).collect();
    let balances: Vec<String> = last.iter().map(|l| l.2.to_string()).collect();
    let revs: Vec<i64> = last.iter().map(|l| l.3).collect();
    let balance = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE customers c SET current_balance = d.balance::numeric, rev = d.rev,
                  updated_at = {now}
           FROM unnest({ids}::uuid[], {expected}::text[], {balances}::text[], {revs}::int8[])
             AS d(id, expected, balance, rev)
           WHERE c.id = d.id AND c.current_balance = d.expected::numeric AND NOT c.is_deleted
           RETURNING c.id"#
    );
    let ledger = ledger_stmt(moves);
    let mut feed = Vec::with_capacity(moves.len() * 2);
    for (customer, _, row, _) in moves {
        feed.push((
            customer.rev,
            customer_change(customer, changes::Op::Update)?,
        ));
        feed.push((row.rev, ledger_change(row)?));
    }
    let stmts = [
        Stmt::raw(balance.sql, balance.values),
        ledger,
        changes::append_unnest_stmt(feed),
    ];
    let answers = db::pipeline(tx, &stmts).await?;
    if answers.first().map(Vec::len) != Some(last.len()) {
        return Err(Error::busy("a balance changed under the payment group"));
    }
    Ok(())
}

fn ledger_stmt(moves: &[Move]) -> Stmt {
    let rows = || moves.iter().map(|m| &m.2);
    let ids: Vec<Uuid> = rows().map(|r| r.id).collect();
    let customers: Vec<Uuid> = rows().map(|r| r.customer_id).collect();
    let branches: Vec<String> = rows()
        .map(|r| r.branch_id.map(|b| b.to_string()).unwrap_or_default())
        .collect();
    let amounts: Vec<String> = rows().map(|r| r.amount.to_string()).collect();
    let after: Vec<String> = rows().map(|r| r.balance_after.to_string()).collect();
    let notes: Vec<String> = rows().map(|r| r.notes.clone()).collect();
    let users: Vec<String> = rows()
        .map(|r| r.created_by.map(|u| u.to_string()).unwrap_or_default())
        .collect();
    let revs: Vec<i64> = rows().map(|r| r.rev).collect();
    let created: Vec<String> = rows().map(|r| r.created_at.to_rfc3339()).collect();
    let cmids: Vec<String> = moves
        .iter()
        .map(|m| m.3.as_ref().map(|k| k.0.clone()).unwrap_or_default())
        .collect();
    let digests: Vec<String> = moves
        .iter()
        .map(|m| m.3.as_ref().map(|k| k.1.clone()).unwrap_or_default())
        .collect();
    let keyed: Vec<bool> = moves.iter().map(|m| m.3.is_some()).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO customer_ledger (id, customer_id, branch_id, transaction_type, amount,
                                       balance_after, reference_id, notes, created_by, rev,
                                       client_mutation_id, request_digest, created_at)
           SELECT l.id, l.customer, nullif(l.branch, '')::uuid, 'PAYMENT', l.amount::numeric,
                  l.after::numeric, NULL, l.notes, nullif(l.usr, '')::uuid, l.rev,
                  CASE WHEN l.keyed THEN l.cmid END, CASE WHEN l.keyed THEN l.digest END,
                  l.created::timestamptz
           FROM unnest({ids}::uuid[], {customers}::uuid[], {branches}::text[], {amounts}::text[],
                       {after}::text[], {notes}::text[], {users}::text[], {revs}::int8[],
                       {cmids}::text[], {digests}::text[], {keyed}::bool[], {created}::text[])
             AS l(id, customer, branch, amount, after, notes, usr, rev, cmid, digest, keyed,
                  created)"#
    );
    Stmt::raw(q.sql, q.values)
}
