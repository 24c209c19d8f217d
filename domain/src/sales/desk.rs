//! The sale desk: `POST /sales` hands its sales to the branch's group
//! commit (`crate::group_commit`), which makes a drained group through the
//! set-based group writer (`sales::make_all`) in one transaction.

use crate::db::{Pool, Tx};
use crate::error::{Error, Result};
use crate::group_commit::{Desk, Group};
use crate::idempotency;
use crate::sales::{self, CreateSale, NewSale, Outcome};
use crate::users::sessions;
use actors::runtime::Command;

/// Sales, grouped per branch.
pub struct Sales;

/// Where `POST /sales` hands its sales.
pub type SaleDesk = Desk<Sales>;

impl Group for Sales {
    type Request = NewSale;
    type Output = Outcome;
    const NAME: &'static str = "create_sales";
    // The metric label sales always had.
    const LABEL: &'static str = "branch";

    async fn together(pool: &Pool, requests: &[NewSale]) -> Result<Vec<Result<Outcome>>> {
        in_one_transaction(pool, requests).await
    }

    async fn alone(pool: &Pool, request: NewSale) -> Result<Outcome> {
        CreateSale(request).run(pool.clone()).await
    }
}

/// The group's replays answered, the rest made by `sales::make_all`, one
/// commit. A sale repeating a mutation id of an earlier sale of the group
/// is made after the commit, where it replays (or is refused) as it would
/// alone. Another process storing the same id first is a fault here: the
/// one-by-one path replays it.
pub async fn in_one_transaction(pool: &Pool, sales: &[NewSale]) -> Result<Vec<Result<Outcome>>> {
    let client = pool.get().await?;
    // BEGIN goes out with the first round trip.
    let mut tx = Tx::begin(&client);
    // Pipelined: one round trip for the callers' checks and the group's
    // replay checks.
    let signers: Vec<_> = sales.iter().map(|s| s.signer).collect();
    let (checked, replays) = futures_util::join!(
        sessions::check_signers(&*tx, &signers),
        futures_util::future::join_all(sales.iter().map(|s| sales::replay(&*tx, s)))
    );
    let earlier =
        idempotency::earlier_with_same_key(sales.iter().map(|s| s.client_mutation_id.as_deref()));
    let mut later = Vec::new();
    let mut fresh: Vec<&NewSale> = Vec::new();
    let mut answers: Vec<Option<Result<Outcome>>> = Vec::with_capacity(sales.len());
    let checked = checked?;
    for (k, (((sale, replay), earlier), check)) in sales
        .iter()
        .zip(replays)
        .zip(earlier)
        .zip(checked)
        .enumerate()
    {
        if let Err(refused) = check {
            // The caller's token no longer stands: its 401, nothing made.
            answers.push(Some(Err(refused)));
            continue;
        }
        match replay {
            Ok(Some(done)) => answers.push(Some(Ok(done))),
            // A refusal, or the id used for a different sale (409): the
            // sale's answer. A replay reads only, so nothing else is ours.
            Err(refused) if refused.is_refusal() || matches!(refused, Error::Conflict(_)) => {
                answers.push(Some(Err(refused)))
            }
            Err(fault) => return Err(fault),
            Ok(None) => {
                if earlier.is_some() {
                    later.push(k);
                } else {
                    fresh.push(sale);
                }
                answers.push(None);
            }
        }
    }
    let made = sales::make_all(&mut tx, &fresh).await?;
    tx.commit().await?;
    drop(client);
    let mut made = made.into_iter();
    for (k, answer) in answers.iter_mut().enumerate() {
        if answer.is_none() && !later.contains(&k) {
            *answer = Some(
                made.next()
                    .unwrap_or_else(|| Err(Error::internal("a sale of the group went unanswered")))
                    .map(|sale| Outcome {
                        sale,
                        replayed: false,
                    }),
            );
        }
    }
    for k in later {
        if let (Some(answer), Some(sale)) = (answers.get_mut(k), sales.get(k)) {
            *answer = Some(CreateSale(sale.clone()).run(pool.clone()).await);
        }
    }
    Ok(answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(Error::internal("a sale of the group went unanswered"))))
        .collect())
}
