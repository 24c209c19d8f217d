//! A prescription's moves: `PENDING` → `DISPENSED` (linking the sale that
//! filled it) or `CANCELLED`, or deleted, each once; every other move is
//! 409, and from the first unit given out it can no longer be cancelled or
//! deleted.

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::{apply, get, sale_ref, Move, NewPrescription, Prescription};
use crate::db::Pool;
use crate::{Acting, Error, Result};

/// Records a new prescription in a transaction of its own.
pub async fn record(pool: &Pool, new: NewPrescription) -> Result<Prescription> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let prescription = super::insert(&tx, new).await?;
    crate::db::commit(tx).await?;
    Ok(prescription)
}

/// A live prescription the caller may see; another branch's reads as 404.
pub async fn visible<C: GenericClient + Sync>(
    c: &C,
    acting: &Acting,
    id: Uuid,
) -> Result<Prescription> {
    get(c, id)
        .await?
        .filter(|p| acting.can_see_branch(p.branch_id))
        .ok_or_else(|| Error::not_found("Prescription not found"))
}

/// Whether any unit was given out against the prescription.
fn partly_dispensed(p: &Prescription) -> bool {
    p.items.iter().any(|i| i.dispensed_quantity > 0)
}

/// Whether `mv` may start from the prescription as it is.
fn allowed(p: &Prescription, mv: &Move) -> bool {
    let stays_in_book = matches!(mv, Move::Cancel | Move::Delete) && partly_dispensed(p);
    mv.allowed_from().contains(&p.status.as_str()) && !stays_in_book
}

/// The 409 for a move the prescription's current state does not allow.
fn refused(p: &Prescription, mv: &Move) -> Error {
    if matches!(mv, Move::Cancel | Move::Delete) && p.status == "PENDING" && partly_dispensed(p) {
        return Error::conflict(format!(
            "Medicines were already dispensed against prescription {}: it stays in the \
             prescription book and cannot be cancelled or deleted.",
            p.rx_number
        ));
    }
    match mv {
        Move::Delete => Error::conflict(format!(
            "Prescription {} was dispensed: it stays in the prescription book and cannot be deleted.",
            p.rx_number
        )),
        Move::Dispense { .. } | Move::Cancel => Error::conflict(format!(
            "Prescription {} is {}; only a PENDING prescription can be dispensed or cancelled.",
            p.rx_number, p.status
        )),
    }
}

/// 400 unless the sale is of the prescription's branch and, when it names a
/// prescription, names this one.
async fn check_sale<C: GenericClient + Sync>(c: &C, p: &Prescription, sale_id: Uuid) -> Result<()> {
    let sale = sale_ref(c, sale_id)
        .await?
        .filter(|s| s.branch_id == p.branch_id)
        .ok_or_else(|| {
            Error::validation(
                "sale_id",
                "`sale_id` must name a sale of the prescription's branch.",
            )
        })?;
    match sale.prescription_id {
        Some(other) if other != p.id => Err(Error::validation(
            "sale_id",
            "That sale was made against another prescription.",
        )),
        _ => Ok(()),
    }
}

/// Runs one move in a transaction: 404 when not visible, 409 when the
/// conditional update finds the prescription no longer in a status allowing it.
pub async fn run_move(
    pool: &Pool,
    acting: &Acting,
    id: Uuid,
    mv: Move,
) -> Result<Option<Prescription>> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let current = visible(&tx, acting, id).await?;
    if !allowed(&current, &mv) {
        return Err(refused(&current, &mv));
    }
    if let Move::Dispense { sale_id, .. } = mv {
        check_sale(&tx, &current, sale_id).await?;
    }
    if !apply(&tx, id, mv).await? {
        // Re-read: a concurrent move may have won since `current` was read.
        let now = visible(&tx, acting, id).await?;
        return Err(refused(&now, &mv));
    }
    let after = if matches!(mv, Move::Delete) {
        None
    } else {
        Some(visible(&tx, acting, id).await?)
    };
    crate::db::commit(tx).await?;
    Ok(after)
}
