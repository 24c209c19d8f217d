//! Sync push: a till's queued changes, applied by that device's actor one
//! batch at a time in arrival order.
//!
//! Each change is atomic on its own: its effect runs inside a savepoint (or,
//! for a sale that can only be refused before it writes, without one), so
//! a rejected change leaves nothing and never sinks the rest of the batch.
//! Sales go to the branch's actor and through the same code as `POST
//! /sales`; consecutive sales of a batch (up to `SALES_PER_COMMIT`) travel
//! there as one run through the branch's push desk, and the runs several
//! tills of the branch queued meanwhile share one transaction and one
//! commit (`runs`). Other changes run on the device's actor, one
//! transaction each. A fault in a shared transaction rolls it all back and
//! each run is applied again alone: together, else one transaction per
//! sale, stopping at the first fault.
//!
//! One effect per `(device_id, client_mutation_id)`, kept forever: a change
//! first claims its key in `push_mutations` (a second server process pushing
//! the same key waits on the primary key), then applies its effect, and its
//! answer is stored in the same commit. A replay reads that answer back
//! verbatim, whether it was an acceptance or a rejection. The answers a
//! batch's keys already have are read in one statement before anything runs:
//! those replays are answered from them, with no transaction and no place
//! in the branch's queue: a batch whose every mutation id is known is
//! answered with that one read.
//!
//! Where things are: `parse` (a change's shape and payload fields),
//! `answer` (the typed answers, as served, stored and replayed), `ledger`
//! (claiming a mutation id, storing and replaying answers, on the shared
//! key, digest and mismatch rule of `crate::idempotency`), `apply` (a
//! change's effect on its own), `runs` (runs of sales, grouped across the
//! branch's tills, and their fallback), and here the device actor's batch
//! command.

use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;
use uuid::Uuid;

use crate::db::Pool;
use crate::error::{Error, Result};
use crate::role::Role;
use crate::sync::devices;
use crate::sync::metrics::SYNC_PUSH_SECONDS;
use actors::runtime::{Command, Registry};

mod answer;
mod apply;
mod ledger;
mod parse;
mod runs;

pub use answer::{AcceptedChange, Answer, PushAnswer, RejectedChange};
use apply::apply_change;
use ledger::stored_answers;
use parse::is_sale;
pub use parse::{Change, PushChange, PushRequest, MAX_NAME_CHARS};
pub use runs::{PushDesk, PushRun, PushRuns};

/// Most changes one push may carry.
pub const MAX_CHANGES: usize = 500;

/// Most consecutive sales of a batch applied in one branch-actor message and
/// one commit: enough to amortise the hop and the WAL flush, few enough that
/// the branch's other work does not wait long behind one batch.
pub const SALES_PER_COMMIT: usize = 50;

/// Most devices' runs of sales one commit makes, unless the branch's
/// `sale_batch_max` override says otherwise: a branch has a few tills, each
/// with at most one run queued, so this bounds a commit at a few hundred
/// sales.
pub const RUNS_PER_COMMIT: usize = 8;

/// Who pushes, for which device, and where its sales land.
#[derive(Debug, Clone)]
pub struct Pusher {
    pub device_id: Uuid,
    /// The device's branch: pushed sales are made there.
    pub branch_id: Uuid,
    pub user_id: Uuid,
    pub role: Role,
    pub org_id: Uuid,
}

/// A push batch for the device's actor.
pub struct PushBatch {
    pub pusher: Pusher,
    pub changes: Vec<Change>,
    pub actors: Arc<Registry>,
    /// Where its runs of sales meet the other tills' of the branch.
    pub desk: Arc<PushDesk>,
    pub span: tracing::Span,
}

impl Command for PushBatch {
    type Error = crate::Error;
    type Output = PushAnswer;
    const NAME: &'static str = "push_batch";

    async fn run(self, pool: Pool) -> Result<PushAnswer> {
        let span = self.span.clone();
        async move {
            let started = Instant::now();
            let result = self.apply(&pool).await;
            let label = if result.is_ok() { "ok" } else { "error" };
            SYNC_PUSH_SECONDS
                .with_label_values(&[label])
                .observe(started.elapsed().as_secs_f64());
            match &result {
                Ok(o) => tracing::info!(
                    accepted = o.accepted.len(),
                    rejected = o.rejected.len(),
                    "push batch applied"
                ),
                Err(e) => tracing::warn!(error = ?e, "push batch stopped; the device retries"),
            }
            result
        }
        .instrument(span)
        .await
    }
}

impl PushBatch {
    async fn apply(mut self, pool: &Pool) -> Result<PushAnswer> {
        // Checked again here, in order with the device's other batches: a
        // batch queued before a revocation is refused once it is revoked.
        let client = pool.get().await?;
        let device = devices::get(&client, self.pusher.device_id)
            .await?
            .ok_or_else(|| Error::not_found("Device not found"))?;
        if device.is_revoked() {
            return Err(Error::forbidden("This device is revoked."));
        }
        devices::touch(&client, device.id).await?;
        let stored = stored_answers(&client, device.id, &self.changes).await?;
        drop(client);
        let mut outcome = PushAnswer::default();
        let mut changes = std::mem::take(&mut self.changes).into_iter().peekable();
        let replay = |c: &Change| stored.get(&c.client_mutation_id);
        while let Some(change) = changes.next() {
            if let Some(answer) = replay(&change) {
                let answered = answer.answer_to(&change.client_mutation_id, &change)?;
                outcome.add(answered.report(&change));
                continue;
            }
            if !is_sale(&change) {
                outcome.add(apply_change(pool, &self.pusher, change).await?);
                continue;
            }
            let mut run = vec![change];
            while run.len() < SALES_PER_COMMIT {
                match changes.next_if(|c| is_sale(c) && replay(c).is_none()) {
                    Some(next) => run.push(next),
                    None => break,
                }
            }
            // Sales run on the branch's actor: stock, counter and balances of
            // a branch change one at a time. The run waits for its turn
            // rather than being refused, so a batch never stops halfway
            // for a busy branch.
            let run = PushRun {
                pusher: self.pusher.clone(),
                changes: run,
                span: tracing::Span::current(),
            };
            for answer in self
                .desk
                .submit_queued(&self.actors, self.pusher.branch_id, run)
                .await?
            {
                outcome.add(answer);
            }
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ledger::{rejected, Answered, MAX_MESSAGE_CHARS};
    use super::parse::MAX_NAME_CHARS;
    use super::*;

    /// What `f` logs, as the plain text formatter writes it.
    fn captured_logs(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn a_pushed_entity_with_a_newline_is_logged_on_one_line() {
        let raw = json!({
            "client_mutation_id": "m-1\nINFO forged",
            "entity": "x\n2026-01-01T00:00:00Z  INFO admin signed in",
            "op": "create\r\n",
            "payload": {},
        });
        let change = Change::parse(&raw, 0).expect("a well-formed change");
        let answered = Answered {
            answer: Answer::Rejected(rejected("m-1", "unsupported", "")),
            replay: None,
        };
        let out = captured_logs(|| {
            answered.report(&change);
        });
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(
            out.contains(r#"entity="x\n2026-01-01T00:00:00Z  INFO admin signed in""#),
            "{out}"
        );
        assert!(out.contains(r#"op="create\r\n""#), "{out}");
    }

    #[test]
    fn long_entity_names_and_messages_are_bounded() {
        let raw = json!({
            "client_mutation_id": "m-1",
            "entity": "e".repeat(MAX_NAME_CHARS + 1),
            "op": "create",
            "payload": {},
        });
        assert!(Change::parse(&raw, 3).is_err());
        let answer = rejected("m", "invalid", &"z".repeat(10_000));
        let message = answer.message;
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
    }
}
