//! A supplier payment made with a debit note (`method: debit_note`,
//! `reference` = the note's number): it settles an open invoice of the
//! note's own supplier and branch for at most what the note has not yet
//! settled.
//!
//! Both steps run in the payment's transaction, after the invoice's own
//! conditional update (so every payment locks the invoice first, then the
//! note: one lock order). `take` locks the note's row and raises its
//! `used_value` by a conditional update (`used_value + amount <=
//! total_value`, and a CHECK backs it), so concurrent payments, from any
//! number of server processes, never use more than the note is worth;
//! `record` writes which payment used it, with composite foreign keys that
//! hold the invoice and the note to one supplier and one branch.

use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::db;
use crate::error::{Error, Result};
use crate::wire;

/// The payment method that settles with a debit note.
pub const METHOD: &str = "debit_note";

/// A debit note a payment has taken value from.
#[derive(Debug, Clone)]
pub struct Taken {
    pub supplier_return_id: Uuid,
    pub supplier_id: Uuid,
    pub branch_id: Uuid,
    /// The note's number as issued (the payment's reference).
    pub number: String,
}

/// Locks the debit note `reference` of invoice `invoice_id`'s branch and
/// takes `amount` from what it has not settled yet. 400 naming `reference`
/// for no such note or another supplier's, naming `amount` for more than
/// the note's unused value.
pub async fn take<C: GenericClient + Sync>(
    tx: &C,
    invoice_id: Uuid,
    reference: &str,
    amount: Decimal,
) -> Result<Taken> {
    let wanted = reference.trim().to_uppercase();
    let lock = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT r.id, r.supplier_id, r.branch_id, r.debit_note_number, r.total_value,
                  r.used_value, r.supplier_id = i.supplier_id AS same_supplier
           FROM supplier_invoices i
           JOIN supplier_returns r ON r.branch_id = i.branch_id
                                  AND upper(r.debit_note_number) = {wanted}
           WHERE i.id = {invoice_id}
           FOR UPDATE OF r"#
    );
    let row = db::raw_opt(tx, &lock.sql, lock.values)
        .await?
        .ok_or_else(|| {
            Error::validation(
                "reference",
                format!(
                    "`reference` must be the number of a debit note of the invoice's branch \
                     (`<BRANCH CODE>-DN-<8 digits>`); {wanted:?} names none."
                ),
            )
        })?;
    let note = Taken {
        supplier_return_id: row.get("id"),
        supplier_id: row.get("supplier_id"),
        branch_id: row.get("branch_id"),
        number: row.get("debit_note_number"),
    };
    if !row.get::<_, bool>("same_supplier") {
        return Err(Error::validation(
            "reference",
            format!(
                "Debit note {} was issued to another supplier: it settles only that \
                 supplier's invoices.",
                note.number
            ),
        ));
    }
    let id = note.supplier_return_id;
    let raise = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE supplier_returns SET used_value = used_value + {amount}::numeric
           WHERE id = {id} AND used_value + {amount}::numeric <= total_value
           RETURNING used_value"#
    );
    if db::raw_opt(tx, &raise.sql, raise.values).await?.is_none() {
        let (total, used): (Decimal, Decimal) = (row.get("total_value"), row.get("used_value"));
        return Err(Error::validation(
            "amount",
            format!(
                "A payment of {} is more than what debit note {} can still settle ({} of {}).",
                wire::two_places(amount),
                note.number,
                wire::two_places(total - used),
                wire::two_places(total)
            ),
        ));
    }
    Ok(note)
}

/// Records that payment `payment_id` of invoice `invoice_id` used `amount`
/// of the note `taken`.
pub async fn record<C: GenericClient + Sync>(
    tx: &C,
    taken: &Taken,
    invoice_id: Uuid,
    payment_id: Uuid,
    amount: Decimal,
) -> Result<()> {
    let id = Uuid::now_v7();
    let (note, supplier, branch) = (taken.supplier_return_id, taken.supplier_id, taken.branch_id);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO debit_note_settlements
             (id, supplier_return_id, invoice_id, payment_id, supplier_id, branch_id, amount)
           VALUES ({id}, {note}, {invoice_id}, {payment_id}, {supplier}, {branch},
                   {amount}::numeric)"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    Ok(())
}
