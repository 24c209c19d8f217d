//! Writing fiscal documents: one row per kind, source and revision, in the
//! transaction of what it fiscalises. Every writer goes through one
//! set-based statement with constant text, so a group of sales adds one
//! statement to its round trip, however many sales it holds.

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::Kind;
use crate::db::{self, Stmt};
use crate::error::Result;

/// A document to queue. `depends_on` names the sources whose documents
/// must be accepted first: the medicines (goods registrations, `T130`) of
/// an invoice or a stock increase, the sale (its invoice, `T109`) of a
/// credit note.
#[derive(Debug, Clone)]
pub struct NewDocument {
    pub kind: Kind,
    pub source_id: Uuid,
    pub branch_id: Option<Uuid>,
    /// The seller's own reference, resent unchanged on every attempt.
    pub seller_reference: String,
    pub depends_on: Vec<Uuid>,
    /// The document's content in EFRIS's field names, frozen here: the
    /// seller's identity (TIN, device) is added when it is sent.
    pub payload: serde_json::Value,
}

/// Queues `docs` in `tx` (one statement). The caller commits.
pub async fn enqueue<C: GenericClient + Sync>(tx: &C, docs: &[NewDocument]) -> Result<()> {
    if docs.is_empty() {
        return Ok(());
    }
    db::run(tx, &enqueue_stmt(docs)).await?;
    Ok(())
}

/// The one multi-row insert of `docs` (first revision each), for a writer
/// that pipelines it with its own statements. A document already queued
/// for the same kind, source and revision is left as it is, so a replayed
/// write queues nothing twice. A document whose dependencies are all
/// accepted starts `pending`; otherwise `waiting`.
pub fn enqueue_stmt(docs: &[NewDocument]) -> Stmt {
    let n = docs.len();
    let (mut ids, mut kinds, mut sources, mut branches) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut refs, mut deps, mut payloads) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for d in docs {
        ids.push(Uuid::now_v7());
        kinds.push(d.kind.as_str().to_owned());
        sources.push(d.source_id);
        branches.push(d.branch_id.map(|b| b.to_string()).unwrap_or_default());
        refs.push(d.seller_reference.clone());
        let mut on = d.depends_on.clone();
        on.sort();
        on.dedup();
        deps.push(on.iter().map(Uuid::to_string).collect::<Vec<_>>().join(","));
        payloads.push(d.payload.to_string());
    }
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO fiscal_documents
             (id, kind, source_id, revision, branch_id, status, depends_on, payload,
              payload_hash, seller_reference)
           SELECT d.id, d.kind, d.source_id, 1, nullif(d.branch, '')::uuid,
                  CASE WHEN (SELECT count(DISTINCT f.source_id) FROM fiscal_documents f
                             WHERE f.kind = CASE d.kind WHEN 'T110' THEN 'T109' ELSE 'T130' END
                               AND f.source_id = ANY(d.deps) AND f.status = 'accepted')
                            = cardinality(d.deps)
                       THEN 'pending' ELSE 'waiting' END,
                  d.deps, d.payload,
                  encode(sha256(convert_to(d.payload::text, 'UTF8')), 'hex'), d.reference
           FROM (SELECT u.id, u.kind, u.source_id, u.branch, u.reference, u.payload::jsonb AS payload,
                        CASE WHEN u.deps = '' THEN '{}'::uuid[]
                             ELSE string_to_array(u.deps, ',')::uuid[] END AS deps
                 FROM unnest({ids}::uuid[], {kinds}::text[], {sources}::uuid[], {branches}::text[],
                             {refs}::text[], {deps}::text[], {payloads}::text[])
                   AS u(id, kind, source_id, branch, reference, deps, payload)) d
           ON CONFLICT DO NOTHING"#
    );
    Stmt::raw(q.sql, q.values)
}

/// The goods registration (`T130`) of each medicine named, built from its
/// row: a first registration (`operationType` 101) or, when what EFRIS
/// records of it changed since its last revision, a modification (102) as
/// the next revision. Deleted medicines and unchanged ones queue nothing.
/// One statement, whatever the number of medicines.
pub fn register_goods_stmt(medicine_ids: &[Uuid]) -> Stmt {
    let ids = medicine_ids.to_vec();
    let category = super::payload::GOODS_CATEGORY;
    let unit = super::payload::MEASURE_UNIT;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO fiscal_documents
             (id, kind, source_id, revision, branch_id, status, payload, payload_hash,
              seller_reference)
           SELECT gen_random_uuid(), 'T130', g.id, g.revision, NULL, 'pending', g.payload,
                  encode(sha256(convert_to(g.payload::text, 'UTF8')), 'hex'),
                  g.id::text || '#' || g.revision
           FROM (
             SELECT m.id, coalesce(prev.revision, 0) + 1 AS revision, prev.payload AS previous,
                    jsonb_build_object(
                      'operationType', CASE WHEN prev.revision IS NULL THEN '101' ELSE '102' END,
                      'goodsName', m.name,
                      'goodsCode', m.id::text,
                      'measureUnit', {unit}::text,
                      'unitPrice', to_char(m.selling_price, 'FM999999999990.00'),
                      'currency', '101',
                      'commodityCategoryId', {category}::text,
                      'haveExciseTax', '102',
                      'description', m.generic_name,
                      'stockPrewarning', m.low_stock_threshold::text,
                      'havePieceUnit', '102') AS payload
             FROM medicines m
             LEFT JOIN LATERAL (
               SELECT f.revision, f.payload FROM fiscal_documents f
               WHERE f.kind = 'T130' AND f.source_id = m.id
               ORDER BY f.revision DESC LIMIT 1) prev ON true
             WHERE m.id = ANY({ids}::uuid[])
           ) g
           WHERE g.previous IS NULL
              OR (g.previous - 'operationType') IS DISTINCT FROM (g.payload - 'operationType')
           ON CONFLICT DO NOTHING"#
    );
    Stmt::raw(q.sql, q.values)
}

/// Queues the goods registration of `medicine_ids` in `tx` (see
/// [`register_goods_stmt`]).
pub async fn register_goods<C: GenericClient + Sync>(tx: &C, medicine_ids: &[Uuid]) -> Result<()> {
    if medicine_ids.is_empty() {
        return Ok(());
    }
    db::run(tx, &register_goods_stmt(medicine_ids)).await?;
    Ok(())
}
