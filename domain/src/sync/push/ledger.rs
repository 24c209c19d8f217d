//! The idempotency ledger of pushed changes: a change claims its (device,
//! client mutation id) key, its answer is stored in the same commit, and a
//! replay reads that answer back verbatim. The key, the digest comparison
//! and the mismatch text are `crate::idempotency`'s; what is push's own is
//! the claim before the effect (a concurrent claimant waits on the key)
//! and the stored answer.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, OnConflict, Query};
use uuid::Uuid;

use super::answer::{Answer, RejectedChange};
use super::apply::count;
use super::parse::Change;
use crate::db;
use crate::error::{Code, Error, Result};
use crate::idempotency::{self, Key, Scope};

/// Longest `message` of a rejection: it may quote what the till sent.
pub(super) const MAX_MESSAGE_CHARS: usize = 500;

/// A change's answer, with what it is counted and logged as once its
/// transaction has committed.
pub(super) struct Answered {
    pub(super) answer: Answer,
    /// The metric label of an answer read back from `push_mutations`
    /// (`replayed`, `idempotency_mismatch`); `None` for a first answer.
    pub(super) replay: Option<&'static str>,
}

impl Answered {
    pub(super) fn report(self, change: &Change) -> Answer {
        if let Some(label) = self.replay {
            count(&change.entity, label);
            return self.answer;
        }
        let outcome = match &self.answer {
            Answer::Accepted(_) => "accepted",
            Answer::Rejected(r) => r.code.as_str(),
        };
        count(&change.entity, outcome);
        // Values the till sent are logged escaped (`?`): a newline in one
        // cannot start a forged log line.
        tracing::info!(
            client_mutation_id = ?change.client_mutation_id,
            entity = ?change.entity,
            op = ?change.op,
            outcome,
            "push change"
        );
        self.answer
    }
}

/// Claims the mutation id for this transaction; when it was claimed before
/// (by an earlier commit, or earlier in this transaction, whose answer is
/// already stored), answers what was answered then (or
/// `idempotency_mismatch` when the payload differs). Waits for a concurrent
/// claimant to finish.
pub(super) async fn claim<C: GenericClient + Sync>(
    tx: &C,
    device_id: Uuid,
    cmid: &str,
    change: &Change,
) -> Result<Option<Answered>> {
    let insert = Query::insert()
        .into_table(Table::PushMutations)
        .columns([
            "device_id",
            "client_mutation_id",
            "request_digest",
            "entity",
            "op",
        ])
        .values_panic([
            device_id.into(),
            cmid.into(),
            change.digest.as_str().into(),
            change.entity.clone().into(),
            change.op.clone().into(),
        ])
        .on_conflict(
            OnConflict::columns(["device_id", "client_mutation_id"])
                .do_nothing()
                .to_owned(),
        )
        .returning_col("device_id")
        .to_owned();
    if db::fetch_opt(tx, &insert).await?.is_some() {
        return Ok(None);
    }
    let key = Key {
        table: "push_mutations",
        scope: Scope::Device(device_id),
        client_mutation_id: cmid,
    };
    let row = db::fetch_one(tx, &key.select(&["outcome", "answer"])).await?;
    Stored::from_row(&row).answer_to(cmid, change).map(Some)
}

/// A claimed key as `push_mutations` holds it.
pub(super) struct Stored {
    digest: String,
    /// `None` until the claiming transaction stores its answer.
    outcome: Option<String>,
    answer: Option<String>,
}

impl Stored {
    fn from_row(r: &tokio_postgres::Row) -> Stored {
        Stored {
            digest: r.get(idempotency::DIGEST_COLUMN),
            outcome: r.get("outcome"),
            answer: r.get("answer"),
        }
    }

    /// What a replay of `change` under this key answers: the stored answer
    /// verbatim, or `idempotency_mismatch` when the change differs.
    pub(super) fn answer_to(&self, cmid: &str, change: &Change) -> Result<Answered> {
        if !change.digest.matches(Some(&self.digest)) {
            return Ok(mismatch(cmid));
        }
        let (Some(outcome), Some(answer)) = (&self.outcome, &self.answer) else {
            return Err(Error::busy("This change is being applied; please retry."));
        };
        Ok(Answered {
            answer: Answer::from_text(outcome, answer).map_err(Error::internal)?,
            replay: Some("replayed"),
        })
    }
}

/// The answers already stored for the batch's mutation ids, in one read:
/// those changes are replays, answered here without a transaction or the
/// branch's actor. An answer is stored in the commit of its effect, so what
/// this reads is final; a key claimed but not yet answered (in flight in
/// another process) is left out, for `claim` to wait on.
pub(super) async fn stored_answers<C: GenericClient + Sync>(
    c: &C,
    device_id: Uuid,
    changes: &[Change],
) -> Result<std::collections::HashMap<String, Stored>> {
    let cmids: Vec<String> = changes
        .iter()
        .map(|c| c.client_mutation_id.clone())
        .collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT client_mutation_id, request_digest, outcome, answer FROM push_mutations
           WHERE device_id = {device_id} AND client_mutation_id = ANY({cmids})
             AND answer IS NOT NULL"#
    );
    Ok(db::raw_all(c, &q.sql, q.values)
        .await?
        .iter()
        .map(|r| (r.get("client_mutation_id"), Stored::from_row(r)))
        .collect())
}

/// How a change of a run stands after `claim_all`.
pub(super) enum Claim {
    /// Claimed now: apply it.
    New,
    /// Answered by an earlier commit (or refused as a mismatch).
    Stored(Answered),
    /// Its key is the key of the change at this earlier index of the run.
    Repeat(usize),
}

/// `claim` for a run of changes in one pipelined round trip: the keys
/// claimed in one statement, then every key of the run read back.
pub(super) async fn claim_all<C: GenericClient + Sync>(
    tx: &C,
    device_id: Uuid,
    changes: &[Change],
) -> Result<Vec<Claim>> {
    let cmids: Vec<String> = changes
        .iter()
        .map(|c| c.client_mutation_id.clone())
        .collect();
    let digests: Vec<String> = changes
        .iter()
        .map(|c| c.digest.as_str().to_owned())
        .collect();
    let entities: Vec<String> = changes.iter().map(|c| c.entity.clone()).collect();
    let ops: Vec<String> = changes.iter().map(|c| c.op.clone()).collect();
    let insert = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO push_mutations (device_id, client_mutation_id, request_digest, entity, op)
           SELECT {device_id}, k.cmid, k.digest, k.entity, k.op
           FROM unnest({cmids}::text[], {digests}::text[], {entities}::text[], {ops}::text[])
             AS k(cmid, digest, entity, op)
           ON CONFLICT (device_id, client_mutation_id) DO NOTHING
           RETURNING client_mutation_id"#
    );
    let read = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT client_mutation_id, request_digest, outcome, answer FROM push_mutations
           WHERE device_id = {device_id} AND client_mutation_id = ANY({cmids})"#
    );
    let answers = db::pipeline(
        tx,
        &[
            db::Stmt::raw(insert.sql, insert.values),
            db::Stmt::raw(read.sql, read.values),
        ],
    )
    .await?;
    let [claimed, stored] = answers.as_slice() else {
        return Err(Error::internal("the claim's pipeline answered short"));
    };
    let claimed: std::collections::HashSet<String> = claimed.iter().map(|r| r.get(0)).collect();
    let stored: std::collections::HashMap<String, &tokio_postgres::Row> =
        stored.iter().map(|r| (r.get(0), r)).collect();
    let earlier = idempotency::earlier_with_same_key(
        changes.iter().map(|c| Some(c.client_mutation_id.as_str())),
    );
    let mut out = Vec::with_capacity(changes.len());
    for (change, earlier) in changes.iter().zip(earlier) {
        let cmid = change.client_mutation_id.as_str();
        if let Some(earlier) = earlier {
            out.push(Claim::Repeat(earlier));
            continue;
        }
        if claimed.contains(cmid) {
            out.push(Claim::New);
            continue;
        }
        let row = stored
            .get(cmid)
            .ok_or_else(|| Error::internal("a claimed mutation id vanished"))?;
        out.push(Claim::Stored(
            Stored::from_row(row).answer_to(cmid, change)?,
        ));
    }
    Ok(out)
}

/// The answer of a change repeating the key of `first` earlier in its run:
/// `first`'s answer replayed, or `idempotency_mismatch` when the payloads
/// differ.
pub(super) fn repeat_of(first: &Answered, first_change: &Change, change: &Change) -> Answered {
    if !change.digest.matches(Some(first_change.digest.as_str())) {
        return mismatch(&change.client_mutation_id);
    }
    Answered {
        answer: first.answer.clone(),
        replay: Some("replayed"),
    }
}

/// The answer to a change reusing a mutation id for a different change.
fn mismatch(cmid: &str) -> Answered {
    Answered {
        answer: Answer::Rejected(rejected(
            cmid,
            Code::IdempotencyMismatch.as_str(),
            &idempotency::mismatch_message("change"),
        )),
        replay: Some("idempotency_mismatch"),
    }
}

/// `store_answer` for a run: every new answer in one statement (replayed
/// answers are already stored).
pub(super) async fn store_answers<C: GenericClient + Sync>(
    tx: &C,
    device_id: Uuid,
    changes: &[Change],
    answered: &[Answered],
) -> Result<()> {
    let mut cmids = Vec::new();
    let mut outcomes = Vec::new();
    let mut answers = Vec::new();
    let mut entity_ids = Vec::new();
    for (change, a) in changes.iter().zip(answered) {
        if a.replay.is_some() {
            continue;
        }
        cmids.push(change.client_mutation_id.clone());
        outcomes.push(a.answer.outcome().to_owned());
        answers.push(a.answer.to_text().map_err(Error::internal)?);
        entity_ids.push(match &a.answer {
            Answer::Accepted(accepted) => accepted.id.clone(),
            Answer::Rejected(_) => String::new(),
        });
    }
    if cmids.is_empty() {
        return Ok(());
    }
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE push_mutations p
           SET outcome = a.outcome, answer = a.answer, entity_id = nullif(a.entity_id, '')
           FROM unnest({cmids}::text[], {outcomes}::text[], {answers}::text[],
                       {entity_ids}::text[]) AS a(cmid, outcome, answer, entity_id)
           WHERE p.device_id = {device_id} AND p.client_mutation_id = a.cmid"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    Ok(())
}

pub(super) async fn store_answer<C: GenericClient + Sync>(
    tx: &C,
    device_id: Uuid,
    cmid: &str,
    answer: &Answer,
    entity_id: Option<String>,
) -> Result<()> {
    let q = Query::update()
        .table(Table::PushMutations)
        .values([
            ("outcome", answer.outcome().into()),
            ("answer", answer.to_text().map_err(Error::internal)?.into()),
            ("entity_id", entity_id.into()),
        ])
        .and_where(Expr::col("device_id").eq(device_id))
        .and_where(Expr::col("client_mutation_id").eq(cmid))
        .to_owned();
    db::execute(tx, &q).await?;
    Ok(())
}

/// Client mistakes become rejections; anything else stops the batch.
pub(super) fn rejects(e: &Error) -> bool {
    matches!(
        e,
        Error::Validation { .. }
            | Error::NotFound(_)
            | Error::Forbidden(_)
            | Error::Conflict(_)
            | Error::PayloadTooLarge(_)
    )
}

pub(super) fn rejected(cmid: &str, code: &str, message: &str) -> RejectedChange {
    let message = match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message.to_owned(),
    };
    RejectedChange {
        client_mutation_id: cmid.to_owned(),
        code: code.to_owned(),
        conflict_id: None,
        field: None,
        message,
    }
}

/// A refused change answers with the code the same refusal has over REST.
pub(super) fn rejection(cmid: &str, e: &Error) -> RejectedChange {
    let mut answer = rejected(cmid, e.code().as_str(), &e.to_string());
    if let Error::Validation {
        field: Some(field), ..
    } = e
    {
        answer.field = Some(field.clone());
    }
    answer
}
