//! Reading fiscal documents: a source's status (for sales, credit notes
//! and receipts), the documents page, one document with its attempts, the
//! summary per branch, and the retry of a rejected document.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use super::Kind;
use crate::db;
use crate::error::{Error, Result};

/// What the authority made of a document, as a sale or credit note shows it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct FiscalStatus {
    /// `waiting`, `pending`, `submitting`, `accepted`, `retrying` or
    /// `rejected`.
    pub status: String,
    /// The fiscal document number (invoices).
    pub fdn: Option<String>,
    pub verification_code: Option<String>,
    /// The QR payload to print.
    pub qr_code: Option<String>,
    /// The authority's reference number (credit notes).
    pub reference_no: Option<String>,
    #[serde(serialize_with = "crate::wire::ts_opt", default)]
    #[schema(value_type = Option<String>)]
    pub accepted_at: Option<DateTime<Utc>>,
    /// The authority's last refusal or the last transport failure.
    pub last_error: Option<String>,
    /// Identifiers issued by the simulator, not the authority.
    pub simulated: bool,
}

const STATUS_COLUMNS: &str = "status, fdn, verification_code, qr_code, reference_no, \
    accepted_at, last_error, simulated";

fn status_from_row(r: &Row) -> FiscalStatus {
    FiscalStatus {
        status: r.get("status"),
        fdn: r.get("fdn"),
        verification_code: r.get("verification_code"),
        qr_code: r.get("qr_code"),
        reference_no: r.get("reference_no"),
        accepted_at: r.get("accepted_at"),
        last_error: r.get("last_error"),
        simulated: r.get("simulated"),
    }
}

/// The status of a source's latest document of `kind` (none when it has
/// none: a document made before the outbox existed).
pub async fn status_of<C: GenericClient + Sync>(
    c: &C,
    kind: Kind,
    source_id: Uuid,
) -> Result<Option<FiscalStatus>> {
    let kind = kind.as_str();
    let sql = format!(
        "SELECT {STATUS_COLUMNS} FROM fiscal_documents WHERE kind = $1 AND source_id = $2 \
         ORDER BY revision DESC LIMIT 1"
    );
    let row = c.query_opt(&sql, &[&kind, &source_id]).await?;
    Ok(row.as_ref().map(status_from_row))
}

/// One document as the fiscal routes show it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FiscalDocument {
    #[schema(value_type = String)]
    pub id: Uuid,
    /// `T109` invoice, `T110` credit note, `T130` goods, `T131` stock.
    pub kind: String,
    #[schema(value_type = String)]
    pub source_id: Uuid,
    pub revision: i32,
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    pub seller_reference: String,
    pub attempts: i32,
    #[serde(serialize_with = "crate::wire::ts")]
    #[schema(value_type = String)]
    pub next_attempt_at: DateTime<Utc>,
    pub last_return_code: Option<String>,
    pub payload_hash: String,
    #[serde(serialize_with = "crate::wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(flatten)]
    pub fiscal: FiscalStatus,
}

/// One attempt to submit a document.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FiscalAttempt {
    pub attempt: i32,
    #[serde(serialize_with = "crate::wire::ts")]
    #[schema(value_type = String)]
    pub started_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::wire::ts")]
    #[schema(value_type = String)]
    pub finished_at: DateTime<Utc>,
    /// `accepted`, `duplicate` (already received, reconciled), `transient`
    /// or `rejected`.
    pub outcome: String,
    pub return_code: Option<String>,
    pub message: String,
}

/// A document with its frozen payload and every attempt.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FiscalDocumentDetail {
    #[serde(flatten)]
    pub document: FiscalDocument,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    pub attempts_log: Vec<FiscalAttempt>,
}

const DOC_COLUMNS: &str = "id, kind, source_id, revision, branch_id, seller_reference, attempts, \
    next_attempt_at, last_return_code, payload_hash, created_at, status, fdn, verification_code, \
    qr_code, reference_no, accepted_at, last_error, simulated";

fn doc_from_row(r: &Row) -> FiscalDocument {
    FiscalDocument {
        id: r.get("id"),
        kind: r.get("kind"),
        source_id: r.get("source_id"),
        revision: r.get("revision"),
        branch_id: r.get("branch_id"),
        seller_reference: r.get("seller_reference"),
        attempts: r.get("attempts"),
        next_attempt_at: r.get("next_attempt_at"),
        last_return_code: r.get("last_return_code"),
        payload_hash: r.get("payload_hash"),
        created_at: r.get("created_at"),
        fiscal: status_from_row(r),
    }
}

/// The documents page's filters. `branch_id` `None` with `all_branches`
/// false means documents of no branch are hidden too.
#[derive(Debug, Clone, Default)]
pub struct DocumentFilter {
    pub status: Option<String>,
    pub kind: Option<String>,
    pub branch_id: Option<Uuid>,
    pub from: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

/// Newest first, paged; the page and the total.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    f: &DocumentFilter,
    offset: i64,
    limit: i64,
) -> Result<(Vec<FiscalDocument>, i64)> {
    let sql = format!(
        "SELECT {DOC_COLUMNS}, count(*) OVER () AS total FROM fiscal_documents
         WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR kind = $2)
           AND ($3::uuid IS NULL OR branch_id = $3)
           AND ($4::timestamptz IS NULL OR created_at >= $4)
           AND ($5::timestamptz IS NULL OR created_at < $5)
         ORDER BY created_at DESC, id DESC OFFSET $6 LIMIT $7"
    );
    let rows = c
        .query(
            &sql,
            &[
                &f.status,
                &f.kind,
                &f.branch_id,
                &f.from,
                &f.until,
                &offset,
                &limit,
            ],
        )
        .await?;
    let total = rows.first().map_or(0, |r| r.get::<_, i64>("total"));
    if rows.is_empty() && offset > 0 {
        // A page past the end still says how many there are.
        let count = c
            .query_one(
                "SELECT count(*) FROM fiscal_documents
                 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR kind = $2)
                   AND ($3::uuid IS NULL OR branch_id = $3)
                   AND ($4::timestamptz IS NULL OR created_at >= $4)
                   AND ($5::timestamptz IS NULL OR created_at < $5)",
                &[&f.status, &f.kind, &f.branch_id, &f.from, &f.until],
            )
            .await?;
        return Ok((Vec::new(), count.get(0)));
    }
    Ok((rows.iter().map(doc_from_row).collect(), total))
}

/// One document with its payload and attempts.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<FiscalDocumentDetail>> {
    let sql = format!("SELECT {DOC_COLUMNS}, payload FROM fiscal_documents WHERE id = $1");
    let Some(row) = c.query_opt(&sql, &[&id]).await? else {
        return Ok(None);
    };
    let attempts = c
        .query(
            "SELECT attempt, started_at, finished_at, outcome, return_code, message
             FROM fiscal_attempts WHERE document_id = $1 ORDER BY attempt",
            &[&id],
        )
        .await?
        .iter()
        .map(|r| FiscalAttempt {
            attempt: r.get(0),
            started_at: r.get(1),
            finished_at: r.get(2),
            outcome: r.get(3),
            return_code: r.get(4),
            message: r.get(5),
        })
        .collect();
    Ok(Some(FiscalDocumentDetail {
        document: doc_from_row(&row),
        payload: row.get("payload"),
        attempts_log: attempts,
    }))
}

/// Re-queues a rejected document as its next revision, its payload
/// built again from its source as it is now (the source was corrected):
/// an invoice from its sale, a credit note from its return; other kinds
/// resend their payload. An accepted document is 409, as is one still on
/// its way. Returns the new revision's id.
pub async fn retry<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Uuid> {
    let row = c
        .query_opt(
            "SELECT status, kind, source_id FROM fiscal_documents WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await?
        .ok_or_else(|| Error::not_found("Fiscal document not found"))?;
    let (status, kind, source): (String, String, Uuid) = (row.get(0), row.get(1), row.get(2));
    match status.as_str() {
        "rejected" => {}
        "accepted" => {
            return Err(Error::conflict(
                "This document was accepted by the authority: it cannot be sent again.",
            ))
        }
        _ => {
            return Err(Error::conflict(
                "Only a rejected document can be retried; this one is still on its way.",
            ))
        }
    }
    let rebuilt = match Kind::parse(&kind) {
        Some(Kind::T109) => crate::sales::get(c, source)
            .await?
            .map(|s| super::payload::invoice(&s).payload),
        Some(Kind::T110) => crate::returns::get(c, source)
            .await?
            .map(|n| super::payload::credit_note(&n).payload),
        _ => None,
    }
    .map(|p| p.to_string())
    .unwrap_or_default();
    let new_id = Uuid::now_v7();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO fiscal_documents
             (id, kind, source_id, revision, branch_id, status, depends_on, payload,
              payload_hash, seller_reference)
           SELECT {new_id}, d.kind, d.source_id,
                  (SELECT max(revision) + 1 FROM fiscal_documents x
                    WHERE x.kind = d.kind AND x.source_id = d.source_id),
                  d.branch_id, 'waiting', d.depends_on, p.payload,
                  encode(sha256(convert_to(p.payload::text, 'UTF8')), 'hex'),
                  d.seller_reference
           FROM fiscal_documents d,
                LATERAL (SELECT coalesce(nullif({rebuilt}, '')::jsonb, d.payload) AS payload) p
           WHERE d.id = {id}
           RETURNING id"#
    );
    db::raw_all(c, &q.sql, q.values).await?;
    Ok(new_id)
}

/// `retry` in its own transaction, for a caller who may see the document's
/// branch (`sees`); 404 otherwise.
pub async fn retry_visible(
    client: &mut deadpool_postgres::Object,
    id: Uuid,
    sees: impl Fn(Option<Uuid>) -> bool,
) -> Result<Uuid> {
    let tx = client.transaction().await?;
    let branch: Option<Option<Uuid>> = tx
        .query_opt(
            "SELECT branch_id FROM fiscal_documents WHERE id = $1",
            &[&id],
        )
        .await?
        .map(|r| r.get(0));
    if !branch.is_some_and(&sees) {
        return Err(Error::not_found("Fiscal document not found"));
    }
    let made = retry(&tx, id).await?;
    crate::db::commit(tx).await?;
    Ok(made)
}

/// Counts by status and the oldest unfinished document's age, per branch.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct BranchSummary {
    /// Null for documents of no branch (goods registrations).
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    pub waiting: i64,
    pub pending: i64,
    pub submitting: i64,
    pub accepted: i64,
    pub retrying: i64,
    pub rejected: i64,
    /// Seconds since the oldest document not yet accepted or rejected was
    /// queued (null when there is none).
    pub oldest_unfinished_seconds: Option<i64>,
}

pub async fn summary<C: GenericClient + Sync>(
    c: &C,
    branch_id: Option<Uuid>,
) -> Result<Vec<BranchSummary>> {
    let rows = c
        .query(
            "SELECT branch_id,
                    count(*) FILTER (WHERE status = 'waiting'),
                    count(*) FILTER (WHERE status = 'pending'),
                    count(*) FILTER (WHERE status = 'submitting'),
                    count(*) FILTER (WHERE status = 'accepted'),
                    count(*) FILTER (WHERE status = 'retrying'),
                    count(*) FILTER (WHERE status = 'rejected'),
                    extract(epoch FROM now() - min(created_at)
                      FILTER (WHERE status NOT IN ('accepted', 'rejected')))::int8
             FROM fiscal_documents
             WHERE $1::uuid IS NULL OR branch_id = $1
             GROUP BY branch_id ORDER BY branch_id NULLS FIRST",
            &[&branch_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| BranchSummary {
            branch_id: r.get(0),
            waiting: r.get(1),
            pending: r.get(2),
            submitting: r.get(3),
            accepted: r.get(4),
            retrying: r.get(5),
            rejected: r.get(6),
            oldest_unfinished_seconds: r.get(7),
        })
        .collect())
}

/// Checks the documents page's `status` and `kind` words (400 naming the
/// field).
pub fn check_filter(status: Option<&str>, kind: Option<&str>) -> Result<()> {
    if let Some(s) = status {
        if !super::STATUSES.contains(&s) {
            return Err(Error::validation(
                "status",
                "`status` must be one of waiting, pending, submitting, accepted, retrying, rejected.",
            ));
        }
    }
    if let Some(k) = kind {
        if Kind::parse(k).is_none() {
            return Err(Error::validation(
                "kind",
                "`kind` must be one of T109, T110, T130, T131.",
            ));
        }
    }
    Ok(())
}
