//! Runs of pushed sales on the branch's actor, grouped across the branch's
//! tills.
//!
//! A device's batch sends each run of its consecutive new sales to the
//! branch's push desk (`PushDesk`, a `group_commit::Desk`) and waits for its
//! answers before going on, so a device has at most one run queued at a
//! time and its changes keep their order. When the branch's actor drains
//! the desk it takes the runs every waiting till queued and makes them in
//! one transaction and one commit (`PushRuns::together`): every run's keys
//! claimed in one pipelined round trip, all the new sales made by the group
//! writer in device order (run after run, each run in its own order), and
//! every run's answers stored in one more round trip. Each run is answered
//! with its own answers. A fault drops the whole transaction and each run
//! is made again alone (`PushRuns::alone`): its sales together, else one
//! transaction each, stopping at the first fault, as a single till's run
//! always was.

use futures_util::future::try_join_all;
use tracing::Instrument;

use super::answer::{AcceptedChange, Answer};
use super::apply::apply_change;
use super::ledger::{claim_all, rejection, repeat_of, store_answers, Answered, Claim};
use super::parse::{new_sale, Change};
use super::Pusher;
use crate::db::{Pool, Tx};
use crate::error::{Error, Result};
use crate::group_commit::{self, Desk, Group};
use crate::sales::{NewSale, Sale};

/// Where devices' batches hand their runs of sales: one queue per branch.
pub type PushDesk = Desk<PushRuns>;

/// One device's run of consecutive new sales, in its order.
#[derive(Clone)]
pub struct PushRun {
    pub(super) pusher: Pusher,
    pub(super) changes: Vec<Change>,
    /// The pushing request's span: the run's answers are logged in it.
    pub(super) span: tracing::Span,
}

/// The runs of a branch's tills, grouped into one commit.
pub struct PushRuns;

impl Group for PushRuns {
    type Request = PushRun;
    type Output = Vec<Answer>;
    const NAME: &'static str = "push_runs";
    const LABEL: &'static str = "push_runs";
    // Different devices' runs are independent: a fault in one run's
    // fallback leaves the others theirs.
    const STOP_AT_FIRST_ERROR: bool = false;

    async fn together(pool: &Pool, runs: &[PushRun]) -> Result<Vec<Result<Vec<Answer>>>> {
        let answers = in_one_transaction(pool, runs).await?;
        Ok(answers.into_iter().map(Ok).collect())
    }

    async fn alone(pool: &Pool, run: PushRun) -> Result<Vec<Answer>> {
        let PushRun {
            pusher,
            changes,
            span,
        } = run;
        let sales: Vec<PushedSale> = changes
            .into_iter()
            .map(|change| PushedSale {
                pusher: pusher.clone(),
                change,
            })
            .collect();
        // Together in one transaction, else one transaction per change,
        // stopping at the first fault as a batch always has (what did
        // commit replays when the device retries).
        group_commit::with_fallback::<PushedSales>(pool, &sales)
            .instrument(span)
            .await
            .into_iter()
            .collect()
    }
}

/// One pushed sale, with who pushed it.
#[derive(Clone)]
struct PushedSale {
    pusher: Pusher,
    change: Change,
}

/// One device's run, grouped as `group_commit` groups a branch's REST
/// sales: the fallback of a group of runs.
struct PushedSales;

impl Group for PushedSales {
    type Request = PushedSale;
    type Output = Answer;
    const NAME: &'static str = "push_sales";
    const LABEL: &'static str = "push";
    const STOP_AT_FIRST_ERROR: bool = true;

    async fn together(pool: &Pool, run: &[PushedSale]) -> Result<Vec<Result<Answer>>> {
        let Some(first) = run.first() else {
            return Ok(Vec::new());
        };
        let run = PushRun {
            pusher: first.pusher.clone(),
            changes: run.iter().map(|s| s.change.clone()).collect(),
            span: tracing::Span::current(),
        };
        let answers = in_one_transaction(pool, std::slice::from_ref(&run)).await?;
        Ok(answers.into_iter().flatten().map(Ok).collect())
    }

    async fn alone(pool: &Pool, sale: PushedSale) -> Result<Answer> {
        apply_change(pool, &sale.pusher, sale.change).await
    }
}

/// Where a change's answer comes from before the commit.
enum Slot {
    Answered(Answered),
    /// Made by the group writer: the index of its sale in the group.
    Fresh(usize),
    /// Repeats the key of this earlier change of its run.
    Repeat(usize),
}

/// The runs' sales in one transaction, in a constant number of round
/// trips however many runs and sales: every run's mutation ids claimed
/// (and every replay read) in one pipelined round trip, the new sales made
/// by the group writer (`sales::make_all`, the path of `POST /sales`), and
/// every run's answers stored in one more pipelined round trip, then the
/// commit. Counted and logged only once the commit stands; a fault returns
/// before that and nothing of any run is applied.
pub(super) async fn in_one_transaction(pool: &Pool, runs: &[PushRun]) -> Result<Vec<Vec<Answer>>> {
    let client = pool.get().await?;
    // BEGIN goes out with the claims.
    let mut tx = Tx::begin(&client);
    let claims = try_join_all(
        runs.iter()
            .map(|r| claim_all(&*tx, r.pusher.device_id, &r.changes)),
    )
    .await?;
    let mut slots: Vec<Vec<Slot>> = Vec::with_capacity(runs.len());
    let mut fresh: Vec<NewSale> = Vec::new();
    for (run, claimed) in runs.iter().zip(claims) {
        let mut run_slots = Vec::with_capacity(run.changes.len());
        for (change, claim) in run.changes.iter().zip(claimed) {
            run_slots.push(match claim {
                Claim::Stored(stored) => Slot::Answered(stored),
                Claim::Repeat(first) => Slot::Repeat(first),
                Claim::New => {
                    let cmid = change.client_mutation_id.as_str();
                    match new_sale(&run.pusher, cmid, &change.payload) {
                        Ok(sale) => {
                            fresh.push(sale);
                            Slot::Fresh(fresh.len() - 1)
                        }
                        Err(e) => Slot::Answered(sale_answer(cmid, Err(e))),
                    }
                }
            });
        }
        slots.push(run_slots);
    }
    let refs: Vec<&NewSale> = fresh.iter().collect();
    let mut made: Vec<Option<Result<Sale>>> = crate::sales::make_all(&mut tx, &refs)
        .await?
        .into_iter()
        .map(Some)
        .collect();
    let mut answered: Vec<Vec<Answered>> = Vec::with_capacity(runs.len());
    for (run, run_slots) in runs.iter().zip(slots) {
        let mut answers: Vec<Answered> = Vec::with_capacity(run_slots.len());
        for (change, slot) in run.changes.iter().zip(run_slots) {
            let answer = match slot {
                Slot::Answered(a) => a,
                Slot::Fresh(i) => {
                    let outcome = made
                        .get_mut(i)
                        .and_then(Option::take)
                        .ok_or_else(|| Error::internal("a pushed sale went unmade"))?;
                    sale_answer(&change.client_mutation_id, outcome)
                }
                // A repeat comes after its first, which is answered.
                Slot::Repeat(first) => match (answers.get(first), run.changes.get(first)) {
                    (Some(a), Some(first_change)) => repeat_of(a, first_change, change),
                    _ => return Err(Error::internal("a repeated mutation id lost its first")),
                },
            };
            answers.push(answer);
        }
        answered.push(answers);
    }
    try_join_all(
        runs.iter()
            .zip(&answered)
            .map(|(run, a)| store_answers(&*tx, run.pusher.device_id, &run.changes, a)),
    )
    .await?;
    tx.commit().await?;
    Ok(runs
        .iter()
        .zip(answered)
        .map(|(run, answers)| {
            run.span.in_scope(|| {
                run.changes
                    .iter()
                    .zip(answers)
                    .map(|(change, a)| a.report(change))
                    .collect()
            })
        })
        .collect())
}

/// The first answer of a pushed sale: accepted with its figures, or
/// rejected as its refusal would be over REST.
fn sale_answer(cmid: &str, made: Result<Sale>) -> Answered {
    let answer = match made {
        Ok(sale) => Answer::Accepted(AcceptedChange {
            client_mutation_id: cmid.to_owned(),
            icv: Some(sale.icv),
            id: sale.id.to_string(),
            invoice_number: Some(sale.invoice_number),
        }),
        Err(e) => Answer::Rejected(rejection(cmid, &e)),
    };
    Answered {
        answer,
        replay: None,
    }
}
