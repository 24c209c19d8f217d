//! The idempotency ledger of pushed changes: a change claims its (device,
//! client mutation id) key, its answer is stored in the same commit, and a
//! replay reads that answer back verbatim.

use super::*;

/// Longest `message` of a rejection: it may quote what the till sent.
pub(super) const MAX_MESSAGE_CHARS: usize = 500;

/// A change's answer, with what it is counted and logged as once its
/// transaction has committed.
pub(super) struct Answered {
    pub(super) accepted: bool,
    pub(super) answer: Json,
    /// The metric label of an answer read back from `push_mutations`
    /// (`replayed`, `idempotency_mismatch`); `None` for a first answer.
    pub(super) replay: Option<&'static str>,
}

impl Answered {
    pub(super) fn report(self, change: &Change) -> (bool, Json) {
        if let Some(label) = self.replay {
            count(&change.entity, label);
            return (self.accepted, self.answer);
        }
        let outcome = if self.accepted {
            "accepted"
        } else {
            self.answer["code"].as_str().unwrap_or("rejected")
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
        (self.accepted, self.answer)
    }
}

/// Claims the mutation id for this transaction; when it was claimed before
/// (by an earlier commit, or earlier in this transaction, whose answer is
/// already stored), answers what was answered then (or
/// `idempotency_mismatch` when the payload differs). Waits for a concurrent
/// claimant to finish.
pub(super) async fn claim(
    tx: &Transaction<'_>,
    device_id: Uuid,
    cmid: &str,
    change: &Change,
) -> Result<Option<Answered>> {
    let insert = Query::insert()
        .into_table("push_mutations")
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
            change.digest.clone().into(),
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
    let q = Query::select()
        .columns(["request_digest", "outcome", "answer"])
        .from("push_mutations")
        .and_where(Expr::col("device_id").eq(device_id))
        .and_where(Expr::col("client_mutation_id").eq(cmid))
        .to_owned();
    let row = db::fetch_one(tx, &q).await?;
    let stored = Stored {
        digest: row.get("request_digest"),
        outcome: row.get("outcome"),
        answer: row.get("answer"),
    };
    stored.answer_to(cmid, change).map(Some)
}

/// A claimed key as `push_mutations` holds it.
pub(super) struct Stored {
    digest: String,
    /// `None` until the claiming transaction stores its answer.
    outcome: Option<String>,
    answer: Option<String>,
}

impl Stored {
    /// What a replay of `change` under this key answers: the stored answer
    /// verbatim, or `idempotency_mismatch` when the change differs.
    pub(super) fn answer_to(&self, cmid: &str, change: &Change) -> Result<Answered> {
        if self.digest != change.digest {
            return Ok(Answered {
                accepted: false,
                answer: rejected(
                    cmid,
                    Code::IdempotencyMismatch.as_str(),
                    "This client_mutation_id was already used for a different change.",
                ),
                replay: Some("idempotency_mismatch"),
            });
        }
        let (Some(outcome), Some(answer)) = (&self.outcome, &self.answer) else {
            return Err(Error::busy("This change is being applied; please retry."));
        };
        let answer: Json = serde_json::from_str(answer).map_err(Error::internal)?;
        Ok(Answered {
            accepted: outcome == "accepted",
            answer,
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
        .map(|r| {
            (
                r.get("client_mutation_id"),
                Stored {
                    digest: r.get("request_digest"),
                    outcome: r.get("outcome"),
                    answer: r.get("answer"),
                },
            )
        })
        .collect())
}

pub(super) async fn store_answer(
    tx: &Transaction<'_>,
    device_id: Uuid,
    cmid: &str,
    accepted: bool,
    answer: &Json,
    entity_id: Option<String>,
) -> Result<()> {
    let outcome = if accepted { "accepted" } else { "rejected" };
    let q = Query::update()
        .table("push_mutations")
        .values([
            ("outcome", outcome.into()),
            ("answer", answer.to_string().into()),
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

pub(super) fn rejected(cmid: &str, code: &str, message: &str) -> Json {
    let message = match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message.to_owned(),
    };
    json!({"client_mutation_id": cmid, "code": code, "message": message})
}

/// A refused change answers with the code the same refusal has over REST.
pub(super) fn rejection(cmid: &str, e: &Error) -> Json {
    let mut answer = rejected(cmid, e.code().as_str(), &e.to_string());
    if let Error::Validation {
        field: Some(field), ..
    } = e
    {
        answer["field"] = json!(field);
    }
    answer
}
