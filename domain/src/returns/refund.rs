//! Which way a refund may go: to the customer's account (a credit refund
//! never takes the balance below zero), or back the way the customer paid,
//! except that a sale on credit refunds to the account what is still owed.

use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::customers;
use crate::error::{Code, Error, Result};
use crate::wire;

/// A credit refund needs the sale's customer, whose balance covers it.
pub(super) async fn check_credit<C: GenericClient + Sync>(
    tx: &C,
    customer_id: Option<Uuid>,
    total: Decimal,
) -> Result<()> {
    let no_account = || {
        Error::validation(
            "refund_method",
            "This sale names no customer, so nothing can be credited to an account: \
             refund it by cash, card or mobile money.",
        )
    };
    let id = customer_id.ok_or_else(no_account)?;
    let customer = customers::get(tx, id).await?.ok_or_else(no_account)?;
    if customer.current_balance < total {
        return Err(Error::rule(
            Code::AmountExceedsBalance,
            "refund_method",
            format!(
                "A credit refund of {} would take {}'s balance of {} below zero: credit at most \
                 {} to the account and refund the rest another way.",
                wire::two_places(total),
                customer.name,
                wire::two_places(customer.current_balance),
                wire::two_places(customer.current_balance)
            ),
        ));
    }
    Ok(())
}

/// A sale on credit refunds to the account what the customer still owes:
/// no cash, card or mobile money leaves the till for goods not yet paid
/// for. Once the customer owes less than the refund (they paid it off),
/// the refund may go back the way they paid.
pub(super) async fn owed_first<C: GenericClient + Sync>(
    tx: &C,
    customer_id: Option<Uuid>,
    total: Decimal,
    method: &str,
) -> Result<()> {
    let Some(id) = customer_id else {
        return Ok(());
    };
    let Some(customer) = customers::get(tx, id).await? else {
        return Ok(());
    };
    if customer.current_balance >= total {
        return Err(Error::rule(
            Code::RefundToAccount,
            "refund_method",
            format!(
                "This sale was on credit and {} still owes {} on account: the refund of {} \
                 lowers that balance (`refund_method: credit`), it cannot be paid out by {}.",
                customer.name,
                wire::two_places(customer.current_balance),
                wire::two_places(total),
                method.replace('_', " ")
            ),
        ));
    }
    Ok(())
}
