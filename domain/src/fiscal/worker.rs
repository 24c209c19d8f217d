//! The outbox's worker, one per server process: it promotes documents
//! whose dependencies were accepted, claims due documents with
//! `FOR UPDATE SKIP LOCKED` under a lease, submits them, and commits each
//! outcome on its own transaction the moment it arrives. A process killed
//! mid-submission leaves its rows `submitting` with a lease that expires;
//! another process then claims them and resends the same payload with the
//! same seller reference, which the authority answers with its first
//! document.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use serde_json::Value;
use uuid::Uuid;

use super::client::{Client, Identifiers, Outcome};
use super::outbox;
use crate::db;
use crate::error::Result;
use crate::sync::changes::{self, Change, Op};

/// How the worker paces itself.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// This process's name in `claimed_by`.
    pub process: String,
    /// How long a claim holds before another process may take the row.
    pub lease: Duration,
    /// The pause between rounds when there was nothing to do.
    pub idle: Duration,
    /// Documents claimed per round.
    pub batch: i64,
    /// The first retry's delay; doubled per attempt up to `backoff_cap`.
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// The device number of each branch (by branch code), and the one used
    /// for documents of no branch (goods registrations) or an unlisted one.
    pub devices: HashMap<String, String>,
    pub default_device: String,
    /// Identifiers issued by the simulator, not the authority.
    pub simulated: bool,
}

/// A claimed document.
struct Claimed {
    id: Uuid,
    kind: String,
    source_id: Uuid,
    payload: Value,
    reference: String,
    attempt: i32,
    branch_code: Option<String>,
    invoice_fdn: Option<String>,
    started_at: DateTime<Utc>,
}

/// Runs the worker until the process ends.
pub async fn run(pool: Pool, client: Arc<Client>, config: WorkerConfig) {
    loop {
        let busy = match round(&pool, &client, &config).await {
            Ok(n) => n > 0,
            Err(e) => {
                tracing::warn!(error = %e, "fiscal worker round failed");
                false
            }
        };
        if !busy {
            tokio::time::sleep(config.idle).await;
        }
    }
}

/// One round: promote, claim, submit, record. The number of documents
/// submitted.
pub async fn round(pool: &Pool, client: &Client, config: &WorkerConfig) -> Result<usize> {
    let conn = pool.get().await?;
    register_missing_goods(&conn).await?;
    promote(&conn).await?;
    let claimed = claim(&conn, config).await?;
    drop(conn);
    let n = claimed.len();
    let submissions = claimed
        .into_iter()
        .map(|doc| async move { submit_one(pool, client, config, doc).await });
    for outcome in futures_util::future::join_all(submissions).await {
        outcome?;
    }
    Ok(n)
}

/// Goods sold or received before their registration was queued (medicines
/// older than the outbox): their registration now.
async fn register_missing_goods<C: GenericClient + Sync>(c: &C) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT DISTINCT dep FROM fiscal_documents d, unnest(d.depends_on) AS dep
           WHERE d.status = 'waiting' AND d.kind IN ('T109', 'T131')
             AND NOT EXISTS (SELECT 1 FROM fiscal_documents g
                             WHERE g.kind = 'T130' AND g.source_id = dep)
           LIMIT 500"#
    );
    let missing: Vec<Uuid> = db::raw_all(c, &q.sql, q.values)
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    outbox::register_goods(c, &missing).await
}

/// Waiting documents whose dependencies were all accepted become pending.
async fn promote<C: GenericClient + Sync>(c: &C) -> Result<u64> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE fiscal_documents d SET status = 'pending', next_attempt_at = now(),
                  updated_at = now()
           WHERE d.status = 'waiting'
             AND NOT EXISTS (
               SELECT 1 FROM unnest(d.depends_on) AS dep
               WHERE NOT EXISTS (
                 SELECT 1 FROM fiscal_documents f
                 WHERE f.kind = CASE d.kind WHEN 'T110' THEN 'T109' ELSE 'T130' END
                   AND f.source_id = dep AND f.status = 'accepted'))
           RETURNING d.id"#
    );
    Ok(db::raw_all(c, &q.sql, q.values).await?.len() as u64)
}

/// Claims due documents (and those whose lease ran out) for this process.
/// Goods registrations first, then invoices, then the rest: what others
/// wait for goes first.
async fn claim<C: GenericClient + Sync>(c: &C, config: &WorkerConfig) -> Result<Vec<Claimed>> {
    let (me, batch) = (config.process.clone(), config.batch);
    let lease = config.lease.as_secs_f64();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH due AS (
             SELECT id FROM fiscal_documents
             WHERE (status IN ('pending', 'retrying') AND next_attempt_at <= now())
                OR (status = 'submitting' AND lease_until < now())
             ORDER BY kind = 'T130' DESC, kind = 'T109' DESC, next_attempt_at
             LIMIT {batch}
             FOR UPDATE SKIP LOCKED)
           UPDATE fiscal_documents d SET status = 'submitting', claimed_by = {me},
                  lease_until = now() + make_interval(secs => {lease}),
                  attempts = d.attempts + 1, updated_at = now()
           FROM due WHERE d.id = due.id
           RETURNING d.id, d.kind, d.source_id, d.payload, d.seller_reference, d.attempts,
                     (SELECT b.code FROM branches b WHERE b.id = d.branch_id) AS branch_code,
                     (SELECT i.fdn FROM fiscal_documents i
                       WHERE d.kind = 'T110' AND i.kind = 'T109' AND i.status = 'accepted'
                         AND i.source_id = d.depends_on[1] LIMIT 1) AS invoice_fdn,
                     now() AS started_at"#
    );
    Ok(db::raw_all(c, &q.sql, q.values)
        .await?
        .iter()
        .map(|r| Claimed {
            id: r.get("id"),
            kind: r.get("kind"),
            source_id: r.get("source_id"),
            payload: r.get("payload"),
            reference: r.get("seller_reference"),
            attempt: r.get("attempts"),
            branch_code: r.get("branch_code"),
            invoice_fdn: r.get("invoice_fdn"),
            started_at: r.get("started_at"),
        })
        .collect())
}

/// Sends one document and records what came of it.
async fn submit_one(
    pool: &Pool,
    client: &Client,
    config: &WorkerConfig,
    doc: Claimed,
) -> Result<()> {
    let device = doc
        .branch_code
        .as_ref()
        .and_then(|code| config.devices.get(code))
        .unwrap_or(&config.default_device)
        .clone();
    let content = content_of(&doc, client.tin());
    let mut outcome = client.submit(&doc.kind, &device, &content).await;
    let mut reconciled = false;
    if let Outcome::AlreadyReceived { code, message } = &outcome {
        // Received before (an answer lost on the way back): the first
        // document's identifiers, never a failure.
        outcome = match client.query(&doc.kind, &device, &doc.reference).await {
            Ok(Some(ids)) => {
                reconciled = true;
                Outcome::Accepted(ids)
            }
            Ok(None) => Outcome::Transient {
                code: Some(code.clone()),
                message: format!("{message} (and the query found nothing yet)"),
            },
            Err(e) => e,
        };
    }
    let mut conn = pool.get().await?;
    let tx = conn.transaction().await?;
    let recorded = record(&tx, config, &doc, &outcome, reconciled).await?;
    if recorded && matches!(outcome, Outcome::Accepted(_)) {
        // The tills learn the identifiers with the acceptance, or not at all.
        publish(&tx, &doc).await?;
    }
    crate::db::commit(tx).await?;
    Ok(())
}

/// The change the branch's tills pull when an invoice or a credit note is
/// accepted: the sale or credit note in its read shape, now with `fiscal`
/// (FDN, verification code, QR code, reference), under a new rev, so a
/// till that printed "fiscal document pending" can reprint. Written in the
/// acceptance's transaction. Goods and stock documents change nothing a
/// till shows.
async fn publish<C: GenericClient + Sync>(tx: &C, doc: &Claimed) -> Result<()> {
    let source = doc.source_id;
    let (entity, payload, branch_id, rev) = match doc.kind.as_str() {
        "T109" => {
            let rev = changes::allocate(tx).await?;
            let q = sea_query::raw_query!(
                PostgresQueryBuilder,
                "UPDATE sales SET rev = {rev} WHERE id = {source}"
            );
            db::raw_all(tx, &q.sql, q.values).await?;
            let Some(sale) = crate::sales::get_shown(tx, source).await? else {
                return Ok(());
            };
            let branch = sale.branch_id;
            ("sale", serde_json::to_value(&sale), branch, rev)
        }
        "T110" => {
            let rev = changes::allocate(tx).await?;
            let q = sea_query::raw_query!(
                PostgresQueryBuilder,
                "UPDATE sale_returns SET rev = {rev} WHERE id = {source}"
            );
            db::raw_all(tx, &q.sql, q.values).await?;
            let Some(note) = crate::returns::get_shown(tx, source).await? else {
                return Ok(());
            };
            let branch = note.branch_id;
            ("credit_note", serde_json::to_value(&note), branch, rev)
        }
        _ => return Ok(()),
    };
    let change = Change {
        entity,
        entity_id: source.to_string(),
        op: Op::Update,
        branch_id: Some(branch_id),
        payload: payload.map_err(crate::Error::internal)?,
    };
    changes::append(tx, rev, change).await
}

/// The content as sent: the frozen payload with the seller's identity, and
/// a credit note's invoice FDN.
fn content_of(doc: &Claimed, tin: &str) -> Value {
    let mut content = doc.payload.clone();
    if let Some(seller) = content
        .get_mut("sellerDetails")
        .and_then(Value::as_object_mut)
    {
        seller.insert("tin".into(), Value::from(tin));
    }
    if doc.kind == "T110" {
        if let Some(obj) = content.as_object_mut() {
            obj.insert(
                "oriInvoiceNo".into(),
                Value::from(doc.invoice_fdn.clone().unwrap_or_default()),
            );
        }
    }
    content
}

/// The delay before attempt `attempt + 1`: doubling from the base, capped,
/// with up to a quarter of jitter either way so processes spread out.
pub fn backoff(config: &WorkerConfig, attempt: i32) -> Duration {
    let exp = u32::try_from(attempt.saturating_sub(1))
        .unwrap_or(0)
        .min(20);
    let base = config.backoff_base.as_secs_f64() * f64::from(1u32 << exp);
    let capped = base.min(config.backoff_cap.as_secs_f64());
    let jitter: f64 = rand::random::<f64>() * 0.5 - 0.25;
    Duration::from_secs_f64((capped * (1.0 + jitter)).max(0.05))
}

/// Commits one outcome: the document's new state and the attempt row, in
/// one transaction, only while this process still holds the claim.
async fn record<C: GenericClient + Sync>(
    c: &C,
    config: &WorkerConfig,
    doc: &Claimed,
    outcome: &Outcome,
    reconciled: bool,
) -> Result<bool> {
    let (id, me, attempt, started) = (doc.id, config.process.clone(), doc.attempt, doc.started_at);
    let simulated = config.simulated;
    let (status, code, message, ids, delay) = match outcome {
        Outcome::Accepted(ids) => (
            "accepted",
            None,
            if reconciled {
                "accepted (already received: reconciled by a query)".to_owned()
            } else {
                "accepted".to_owned()
            },
            ids.clone(),
            0.0,
        ),
        Outcome::Rejected { code, message } => (
            "rejected",
            Some(code.clone()),
            message.clone(),
            Identifiers::default(),
            0.0,
        ),
        Outcome::Transient { code, message } => (
            "retrying",
            code.clone(),
            message.clone(),
            Identifiers::default(),
            backoff(config, attempt).as_secs_f64(),
        ),
        Outcome::AlreadyReceived { code, message } => (
            "retrying",
            Some(code.clone()),
            message.clone(),
            Identifiers::default(),
            backoff(config, attempt).as_secs_f64(),
        ),
    };
    let attempt_outcome = match (status, reconciled) {
        ("accepted", true) => "duplicate",
        ("accepted", false) => "accepted",
        ("rejected", _) => "rejected",
        _ => "transient",
    };
    let message: String = message.chars().take(2000).collect();
    let error = (status != "accepted").then(|| message.clone());
    let (fdn, vc, qr, reference_no) = (
        ids.fdn,
        ids.verification_code,
        ids.qr_code,
        ids.reference_no,
    );
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH done AS (
             UPDATE fiscal_documents SET status = {status},
                    fdn = {fdn}, verification_code = {vc}, qr_code = {qr},
                    reference_no = {reference_no},
                    accepted_at = CASE WHEN {status} = 'accepted' THEN now() END,
                    simulated = {simulated},
                    last_error = CASE WHEN {status} = 'accepted' THEN NULL ELSE {error} END,
                    last_return_code = coalesce({code}, last_return_code),
                    next_attempt_at = now() + make_interval(secs => {delay}),
                    lease_until = NULL, claimed_by = NULL, updated_at = now()
             WHERE id = {id} AND status = 'submitting' AND claimed_by = {me}
             RETURNING id),
           logged AS (
             INSERT INTO fiscal_attempts (id, document_id, attempt, started_at, outcome,
                                          return_code, message, claimed_by)
             SELECT gen_random_uuid(), done.id, {attempt}, {started}, {attempt_outcome},
                    {code}, {message}, {me}
             FROM done
             ON CONFLICT (document_id, attempt) DO NOTHING)
           SELECT id FROM done"#
    );
    // No row: the claim was lost (the lease ran out and another process
    // took the document); that process records its own outcome.
    Ok(!db::raw_all(c, &q.sql, q.values).await?.is_empty())
}
