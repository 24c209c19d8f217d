//! Sync push: a till's queued changes, applied by that device's actor one
//! batch at a time in arrival order.
//!
//! Each change is atomic on its own: its effect runs inside a savepoint (or,
//! for a sale that can only be refused before it writes, without one), so
//! a rejected change leaves nothing and never sinks the rest of the batch.
//! Sales go to the branch's actor and through the same code as `POST
//! /sales`; consecutive sales of a batch (up to `SALES_PER_COMMIT`) travel
//! there as one message and share one transaction and one commit. Other
//! changes run on the device's actor, one transaction each. A fault in a
//! shared transaction rolls it all back and its sales are applied again one
//! transaction each, stopping at the first fault.
//!
//! One effect per `(device_id, client_mutation_id)`, kept forever: a change
//! first claims its key in `push_mutations` (a second server process pushing
//! the same key waits on the primary key), then applies its effect, and its
//! answer is stored in the same commit. A replay reads that answer back
//! verbatim, whether it was an acceptance or a rejection.

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use deadpool_postgres::{GenericClient, Transaction};
use sea_query::{Expr, ExprTrait, OnConflict, Query};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};
use tracing::Instrument;
use uuid::Uuid;

use actors::db::Pool;
use actors::error::Code;
use actors::metrics::{SYNC_CHANGES, SYNC_PUSH_SECONDS};
use actors::sales::{NewSale, Sale, SaleRequest};
use actors::{db, Action, Command, Error, Registry, Result, Role};

use crate::store::devices;
use crate::sync::conflicts::{self, NewConflict, Origin};
use crate::sync::entities::{same, Entity};

/// Most changes one push may carry.
pub const MAX_CHANGES: usize = 500;
/// Most consecutive sales of a batch applied in one branch-actor message and
/// one commit: enough to amortise the hop and the WAL flush, few enough that
/// the branch's other work does not wait long behind one batch.
pub const SALES_PER_COMMIT: usize = 50;
/// Longest `entity` or `op` a change may name (the longest real one is 8).
const MAX_NAME_CHARS: usize = 50;
/// Longest `message` of a rejection: it may quote what the till sent.
const MAX_MESSAGE_CHARS: usize = 500;
/// How far in the past an offline sale may be dated.
const MAX_SALE_AGE_DAYS: i64 = 90;

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

/// One change as the till sent it, with the digest that tells a retry from
/// a different change reusing its mutation id.
#[derive(Debug, Clone)]
pub struct Change {
    pub client_mutation_id: String,
    pub entity: String,
    pub op: String,
    pub payload: Json,
    digest: String,
}

impl Change {
    /// The shape of `changes[index]`: an object with a `client_mutation_id`
    /// of 1 to 200 characters, string `entity` and `op`, and an object
    /// `payload`; else 400 naming the field. (Unknown entities and ops are
    /// not shape errors: they are answered per change as `unsupported`.)
    pub fn parse(raw: &Json, index: usize) -> Result<Change> {
        let field = |k: &str| format!("changes[{index}].{k}");
        let text = |k: &str| {
            raw.get(k).and_then(Json::as_str).ok_or_else(|| {
                Error::validation(field(k), format!("`{}` must be a string.", field(k)))
            })
        };
        let cmid = text("client_mutation_id")?;
        if cmid.trim().is_empty() || cmid.chars().count() > 200 {
            return Err(Error::validation(
                field("client_mutation_id"),
                "Each change needs a `client_mutation_id` of 1 to 200 characters.",
            ));
        }
        let (entity, op) = (text("entity")?, text("op")?);
        for (k, v) in [("entity", entity), ("op", op)] {
            if v.chars().count() > MAX_NAME_CHARS {
                return Err(Error::validation(
                    field(k),
                    format!(
                        "`{}` must be at most {MAX_NAME_CHARS} characters.",
                        field(k)
                    ),
                ));
            }
        }
        let payload = raw
            .get("payload")
            .filter(|p| p.is_object())
            .cloned()
            .ok_or_else(|| {
                Error::validation(
                    field("payload"),
                    format!("`{}` must be an object.", field("payload")),
                )
            })?;
        let canonical = json!({"entity": entity, "op": op, "payload": payload});
        Ok(Change {
            client_mutation_id: cmid.to_owned(),
            entity: entity.to_owned(),
            op: op.to_owned(),
            payload,
            digest: hex::encode(Sha256::digest(canonical.to_string().as_bytes())),
        })
    }
}

/// The push answer: `accepted[]` and `rejected[]`, each entry exactly as
/// first answered for its mutation id.
#[derive(Debug, Default, serde::Serialize)]
pub struct PushOutcome {
    pub accepted: Vec<Json>,
    pub rejected: Vec<Json>,
}

/// A push batch for the device's actor.
pub struct PushBatch {
    pub pusher: Pusher,
    pub changes: Vec<Change>,
    pub actors: Arc<Registry>,
    pub span: tracing::Span,
}

impl Command for PushBatch {
    type Output = PushOutcome;
    const NAME: &'static str = "push_batch";

    async fn run(self, pool: Pool) -> Result<PushOutcome> {
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
    async fn apply(mut self, pool: &Pool) -> Result<PushOutcome> {
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
        drop(client);
        let mut outcome = PushOutcome::default();
        let mut changes = std::mem::take(&mut self.changes).into_iter().peekable();
        while let Some(change) = changes.next() {
            if !is_sale(&change) {
                outcome.add(apply_change(pool, &self.pusher, change).await?);
                continue;
            }
            let mut run = vec![change];
            while run.len() < SALES_PER_COMMIT {
                match changes.next_if(is_sale) {
                    Some(next) => run.push(next),
                    None => break,
                }
            }
            // Sales run on the branch's actor: stock, counter and balances of
            // a branch change one at a time.
            let job = ApplySales {
                pusher: self.pusher.clone(),
                changes: run,
                span: tracing::Span::current(),
            };
            for answer in self
                .actors
                .branch_queued(self.pusher.branch_id, job)
                .await?
            {
                outcome.add(answer);
            }
        }
        Ok(outcome)
    }
}

impl PushOutcome {
    fn add(&mut self, (accepted, answer): (bool, Json)) {
        if accepted {
            self.accepted.push(answer);
        } else {
            self.rejected.push(answer);
        }
    }
}

fn is_sale(change: &Change) -> bool {
    change.entity == "sale" && change.op == "create"
}

/// Consecutive sales of one batch, applied in order on the branch actor.
struct ApplySales {
    pusher: Pusher,
    changes: Vec<Change>,
    span: tracing::Span,
}

impl Command for ApplySales {
    type Output = Vec<(bool, Json)>;
    const NAME: &'static str = "push_sales";

    async fn run(self, pool: Pool) -> Result<Vec<(bool, Json)>> {
        let ApplySales {
            pusher,
            changes,
            span,
        } = self;
        async move {
            if changes.len() > 1 {
                match in_one_transaction(&pool, &pusher, &changes).await {
                    Ok(answers) => return Ok(answers),
                    Err(fault) => tracing::warn!(
                        error = ?fault,
                        changes = changes.len(),
                        "pushed sales failed together; applying them one by one"
                    ),
                }
            }
            // A lone sale, or a run whose shared transaction faulted (none of
            // it stands): one transaction per change, stopping at the first
            // fault as a batch always has. What did commit replays.
            let mut answers = Vec::with_capacity(changes.len());
            for change in changes {
                answers.push(apply_change(&pool, &pusher, change).await?);
            }
            Ok(answers)
        }
        .instrument(span)
        .await
    }
}

/// The run's changes in one transaction, each atomic on its own. Counted
/// and logged only once the commit stands; a fault returns before that and
/// nothing of the run is applied.
async fn in_one_transaction(
    pool: &Pool,
    pusher: &Pusher,
    changes: &[Change],
) -> Result<Vec<(bool, Json)>> {
    let mut client = pool.get().await?;
    let mut tx = client.transaction().await?;
    let mut answered = Vec::with_capacity(changes.len());
    for change in changes {
        answered.push(apply_in(&mut tx, pusher, change, true).await?);
    }
    tx.commit().await?;
    Ok(changes
        .iter()
        .zip(answered)
        .map(|(change, a)| a.report(change))
        .collect())
}

/// What a change did, before it is written down as the answer.
enum Verdict {
    Accepted {
        id: String,
        icv: Option<i64>,
        invoice_number: Option<String>,
    },
    Conflict(NewConflict),
    /// An entity or op this server does not apply.
    Unsupported(String),
}

/// A change's answer, with what it is counted and logged as once its
/// transaction has committed.
struct Answered {
    accepted: bool,
    answer: Json,
    /// The metric label of an answer read back from `push_mutations`
    /// (`replayed`, `idempotency_mismatch`); `None` for a first answer.
    replay: Option<&'static str>,
}

impl Answered {
    fn report(self, change: &Change) -> (bool, Json) {
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

/// Applies one change in its own transaction and answers `(accepted,
/// entry)`. A client mistake is a rejection; a fault of ours or of the
/// database stops the batch (the device retries; what was applied replays).
async fn apply_change(pool: &Pool, pusher: &Pusher, change: Change) -> Result<(bool, Json)> {
    let mut client = pool.get().await?;
    let mut tx = client.transaction().await?;
    let answered = apply_in(&mut tx, pusher, &change, false).await?;
    tx.commit().await?;
    Ok(answered.report(&change))
}

/// One change inside `tx`: claims its key (or reads back its answer), runs
/// the effect in a savepoint (a sale in a shared run only when it needs
/// one), which a rejection rolls back alone, and stores the answer. Any other error is a fault: the caller drops `tx`.
async fn apply_in(
    tx: &mut Transaction<'_>,
    pusher: &Pusher,
    change: &Change,
    shared: bool,
) -> Result<Answered> {
    let cmid = change.client_mutation_id.as_str();
    if let Some(stored) = claim(tx, pusher.device_id, cmid, change).await? {
        return Ok(stored);
    }
    let verdict = if shared && is_sale(change) {
        // In a shared run a sale skips the savepoint when it can (see
        // `sales::create_shared`); a conflict there is a fault, which the
        // one-transaction-per-change path then answers as before.
        match new_sale(pusher, cmid, &change.payload) {
            Ok(new_sale) => actors::sales::create_shared(tx, &new_sale)
                .await?
                .map(|made| sold(&made)),
            Err(e) => Err(e),
        }
    } else {
        let sp = tx.savepoint("change").await?;
        match effect(&sp, pusher, cmid, change).await {
            Ok(v) => {
                sp.commit().await?;
                Ok(v)
            }
            Err(e) if rejects(&e) => {
                sp.rollback().await?;
                Err(e)
            }
            Err(e) => return Err(e),
        }
    };
    let (accepted, answer, entity_id) = match verdict {
        Ok(Verdict::Accepted {
            id,
            icv,
            invoice_number,
        }) => {
            let answer = json!({
                "client_mutation_id": cmid,
                "id": id,
                "icv": icv,
                "invoice_number": invoice_number,
            });
            (true, answer, Some(id))
        }
        Ok(Verdict::Conflict(c)) => {
            let entity_id = c.entity_id.to_string();
            let origin = Origin {
                org_id: pusher.org_id,
                branch_id: pusher.branch_id,
                device_id: pusher.device_id,
                user_id: pusher.user_id,
                client_mutation_id: cmid,
            };
            let id = conflicts::insert(&*tx, &origin, c).await?;
            let mut answer = rejected(cmid, Code::Conflict.as_str(), &id.to_string());
            answer["conflict_id"] = json!(id);
            (false, answer, Some(entity_id))
        }
        Ok(Verdict::Unsupported(why)) => (
            false,
            rejected(cmid, Code::Unsupported.as_str(), &why),
            None,
        ),
        Err(e) => (false, rejection(cmid, &e), None),
    };
    store_answer(tx, pusher.device_id, cmid, accepted, &answer, entity_id).await?;
    Ok(Answered {
        accepted,
        answer,
        replay: None,
    })
}

fn count(entity: &str, outcome: &str) {
    let entity = match entity {
        "sale" | "customer" | "supplier" | "medicine" => entity,
        _ => "other",
    };
    SYNC_CHANGES.with_label_values(&[entity, outcome]).inc();
}

/// Claims the mutation id for this transaction; when it was claimed before
/// (by an earlier commit, or earlier in this transaction, whose answer is
/// already stored), answers what was answered then (or
/// `idempotency_mismatch` when the payload differs). Waits for a concurrent
/// claimant to finish.
async fn claim(
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
    let digest: String = row.get("request_digest");
    if digest != change.digest {
        return Ok(Some(Answered {
            accepted: false,
            answer: rejected(
                cmid,
                Code::IdempotencyMismatch.as_str(),
                "This client_mutation_id was already used for a different change.",
            ),
            replay: Some("idempotency_mismatch"),
        }));
    }
    let (Some(outcome), Some(answer)) = (
        row.get::<_, Option<String>>("outcome"),
        row.get::<_, Option<String>>("answer"),
    ) else {
        return Err(Error::busy("This change is being applied; please retry."));
    };
    let answer: Json = serde_json::from_str(&answer).map_err(Error::internal)?;
    Ok(Some(Answered {
        accepted: outcome == "accepted",
        answer,
        replay: Some("replayed"),
    }))
}

async fn store_answer(
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
fn rejects(e: &Error) -> bool {
    matches!(
        e,
        Error::Validation { .. }
            | Error::NotFound(_)
            | Error::Forbidden(_)
            | Error::Conflict(_)
            | Error::PayloadTooLarge(_)
    )
}

fn rejected(cmid: &str, code: &str, message: &str) -> Json {
    let message = match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message.to_owned(),
    };
    json!({"client_mutation_id": cmid, "code": code, "message": message})
}

/// A refused change answers with the code the same refusal has over REST.
fn rejection(cmid: &str, e: &Error) -> Json {
    let mut answer = rejected(cmid, e.code().as_str(), &e.to_string());
    if let Error::Validation {
        field: Some(field), ..
    } = e
    {
        answer["field"] = json!(field);
    }
    answer
}

/// The change's effect, inside its savepoint.
async fn effect<C: GenericClient + Sync>(
    tx: &C,
    pusher: &Pusher,
    cmid: &str,
    change: &Change,
) -> Result<Verdict> {
    let entity = Entity::parse(&change.entity);
    let supported = match change.entity.as_str() {
        "sale" => change.op == "create",
        _ => entity.is_some() && ["create", "update", "delete"].contains(&change.op.as_str()),
    };
    if !supported {
        return Ok(Verdict::Unsupported(format!(
            "`{}`/`{}` is not a change this server applies.",
            change.entity, change.op
        )));
    }
    // The REST rule of each entity; a pushed sale is a sale.
    let action = entity.map_or(Action::Sell, Entity::action);
    if !action.permits(pusher.role) {
        return Err(Error::forbidden(format!(
            "Your role ({}) may not write {} records.",
            pusher.role, change.entity
        )));
    }
    let Some(entity) = entity else {
        return sale(tx, pusher, cmid, &change.payload).await;
    };
    let payload = &change.payload;
    match change.op.as_str() {
        "create" => {
            let id = optional_id(payload)?;
            let id = entity.create(tx, payload, id, pusher.role).await?;
            Ok(accepted_id(id))
        }
        "update" => update(tx, pusher, entity, payload).await,
        _ => {
            let id = required_id(payload)?;
            entity.delete(tx, id).await?;
            Ok(accepted_id(id))
        }
    }
}

fn accepted_id(id: Uuid) -> Verdict {
    Verdict::Accepted {
        id: id.to_string(),
        icv: None,
        invoice_number: None,
    }
}

/// A pushed sale: the `POST /sales` body, made on the device's branch, with
/// the device and mutation id stored on the sale (a unique key backs the
/// one-effect rule) and an optional `occurred_at` for a sale made offline.
async fn sale<C: GenericClient + Sync>(
    tx: &C,
    pusher: &Pusher,
    cmid: &str,
    payload: &Json,
) -> Result<Verdict> {
    let made = actors::sales::create(tx, &new_sale(pusher, cmid, payload)?).await?;
    Ok(sold(&made))
}

/// The `POST /sales` body of a pushed sale, checked, for the device's branch.
fn new_sale(pusher: &Pusher, cmid: &str, payload: &Json) -> Result<NewSale> {
    let request: SaleRequest = serde_json::from_value(payload.clone())
        .map_err(|e| Error::bad_request(format!("The sale does not fit: {e}.")))?;
    if request.branch_id.is_some_and(|b| b != pusher.branch_id) {
        return Err(Error::forbidden("A device sells only on its own branch."));
    }
    let mut new_sale = request.validate(pusher.branch_id, pusher.user_id, pusher.role)?;
    new_sale.device_id = Some(pusher.device_id);
    new_sale.client_mutation_id = Some(cmid.to_owned());
    new_sale.occurred_at = occurred_at(payload)?;
    Ok(new_sale)
}

fn sold(made: &Sale) -> Verdict {
    Verdict::Accepted {
        id: made.id.to_string(),
        icv: Some(made.icv),
        invoice_number: Some(made.invoice_number.clone()),
    }
}

fn occurred_at(payload: &Json) -> Result<Option<DateTime<Utc>>> {
    let Some(raw) = payload.get("occurred_at").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let at = raw
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| {
            Error::validation(
                "occurred_at",
                "`occurred_at` must be an RFC 3339 timestamp.",
            )
        })?;
    let now = Utc::now();
    if at > now + Duration::minutes(5) || at < now - Duration::days(MAX_SALE_AGE_DAYS) {
        return Err(Error::validation(
            "occurred_at",
            format!("`occurred_at` must be within the last {MAX_SALE_AGE_DAYS} days."),
        ));
    }
    Ok(Some(at))
}

/// A pushed update. With a `base_rev` behind the server row, only the
/// fields the till changed since its base are written, and if one of them
/// would overwrite a server value the till never saw, nothing is written: a
/// conflict is recorded instead.
async fn update<C: GenericClient + Sync>(
    tx: &C,
    pusher: &Pusher,
    entity: Entity,
    payload: &Json,
) -> Result<Verdict> {
    let id = required_id(payload)?;
    let base_rev = base_rev(payload)?;
    let sent = entity.changed_fields(payload);
    if sent.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let (server, server_rev) = entity
        .lock_current(tx, id)
        .await?
        .ok_or_else(|| entity.not_found())?;
    let actor = (pusher.user_id, pusher.role);
    let Some(base_rev) = base_rev.filter(|b| *b < server_rev) else {
        entity.update(tx, id, sent, actor).await?;
        return Ok(accepted_id(id));
    };
    let base = entity.version_at(tx, id, base_rev).await?;
    let changed: serde_json::Map<String, Json> = sent
        .iter()
        .filter(|(f, v)| match &base {
            Some(b) => !same(v, b.get(f.as_str()).unwrap_or(&Json::Null)),
            None => true,
        })
        .map(|(f, v)| (f.clone(), v.clone()))
        .collect();
    let clash = changed
        .iter()
        .any(|(f, v)| !same(v, server.get(f.as_str()).unwrap_or(&Json::Null)));
    if clash {
        // Kept only if it could be applied: values the entity would refuse
        // (too long, wrong shape) or a role may not write are answered now,
        // not stored for head office.
        entity
            .check_update(tx, id, &sent, &changed, pusher.role)
            .await?;
        let mut client_version = base.clone().unwrap_or_else(|| server.clone());
        if let Some(obj) = client_version.as_object_mut() {
            obj.extend(sent);
        }
        return Ok(Verdict::Conflict(NewConflict {
            entity,
            entity_id: id,
            base_rev,
            server_rev,
            server_version: server,
            client_version,
            base_version: base,
            payload: entity.stored_payload(payload),
        }));
    }
    if !changed.is_empty() {
        entity.update(tx, id, changed, actor).await?;
    }
    Ok(accepted_id(id))
}

fn required_id(payload: &Json) -> Result<Uuid> {
    optional_id(payload)?
        .ok_or_else(|| Error::validation("id", "The payload needs the record's `id`."))
}

fn optional_id(payload: &Json) -> Result<Option<Uuid>> {
    match payload.get("id") {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| Error::validation("id", "`id` must be a UUID string.")),
    }
}

fn base_rev(payload: &Json) -> Result<Option<i64>> {
    match payload.get("base_rev") {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v.as_i64().filter(|r| *r >= 0).map(Some).ok_or_else(|| {
            Error::validation("base_rev", "`base_rev` must be a non-negative integer.")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            accepted: false,
            answer: json!({"code": "unsupported"}),
            replay: None,
        };
        let out = crate::telemetry::captured_text_logs(|| {
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
        let message = answer["message"].as_str().unwrap_or_default();
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
    }
}
